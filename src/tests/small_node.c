/* LD_PRELOAD for a ctest: sysconf(_SC_PHYS_PAGES) reports a node of 16 MiB,
 * so that a memory check (kc_need_node_memory) refuses what a test asks for
 * whatever the memory of the machine that runs it; every other name goes to
 * the C library's sysconf. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>

long sysconf(int name) {
    long (*libc_sysconf)(int) = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
    if (!libc_sysconf) return -1;
    if (name != _SC_PHYS_PAGES) return libc_sysconf(name);
    const long page = libc_sysconf(_SC_PAGESIZE);
    return page > 0 ? (16L << 20) / page : -1;
}
