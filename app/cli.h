#pragma once

namespace switchyard {

// Parses the command line of the `switchyard` binary and runs the chosen subcommand.
int RunCli(int argc, char** argv);

}  // namespace switchyard
