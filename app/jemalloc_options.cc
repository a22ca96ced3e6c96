// jemalloc's options for the executables that link it (docs/architecture.md §4, "The
// allocator"). jemalloc reads this symbol once, at its first allocation; /etc/malloc.conf
// and then the MALLOC_CONF environment variable override it, option by option.
//
// thp:always: every extent jemalloc maps is marked for transparent huge pages
// (madvise(MADV_HUGEPAGE); Debian's kernel default is "madvise", which honours it). The
// fold fills RocksDB's memtables, tens of megabytes each, in memory touched for the first
// time: with 4 KiB pages, faulting and zeroing those pages took about a quarter of the fold
// thread, and the flush's sort of the memtable chases pointers across all of it. With huge
// pages, BM_FoldIntoRocksDb/50000/1 folds 381-399 k events/s against 255-300 k, and restart
// to ready at 1 M accounts takes 0.31-0.33 s against 0.66-0.67 s (bench/README.md, "The
// event log at scale").
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's.
const char* malloc_conf = "thp:always";
}
