#include "../common/slot.h"
