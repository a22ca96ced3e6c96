#pragma once

#include <cstddef>

namespace switchyard {

// The CPUs this process may run on (its sched_getaffinity mask, which taskset, cgroups'
// cpusets and container limits narrow), at least 1. Defaults for worker counts follow this,
// not the machine's core count.
size_t UsableCpuCount();

}  // namespace switchyard
