#include "app/cli.h"

int main(int argc, char** argv) { return switchyard::RunCli(argc, argv); }
