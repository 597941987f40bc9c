//! /proc/meminfo, the kernel's own account of the memory a fleet costs.

/// A /proc/meminfo field in bytes (0 if unreadable), `key` with its colon ("Slab:").
pub fn meminfo(key: &str) -> i64 {
    meminfo_fields(&[key])[0]
}

/// Several /proc/meminfo fields from one read, in the order of `keys`.
pub fn meminfo_fields<const N: usize>(keys: &[&str; N]) -> [i64; N] {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    keys.map(|key| {
        (text.lines().find_map(|l| l.strip_prefix(key)))
            .and_then(|v| v.split_whitespace().next()?.parse::<i64>().ok())
            .map_or(0, |kb| kb * 1024)
    })
}

/// The memory the kernel holds for processes and for itself, page cache aside: anonymous
/// memory, tmpfs (Shmem), slab, kernel stacks, page tables and per-CPU memory. What a
/// fleet adds to it is what its nodes cost. MemAvailable moved by hundreds of KB per node
/// between two runs of the same 1,000 nodes, with the page cache, the previous fleet's
/// memory still being given back, and the kernel's estimate of what it could reclaim;
/// these parts moved by a few KB. Not VmallocUsed: kernel stacks are counted there too.
pub fn memory_held() -> i64 {
    let parts = meminfo_fields(&[
        "AnonPages:",
        "Shmem:",
        "Slab:",
        "KernelStack:",
        "PageTables:",
        "Percpu:",
    ]);
    parts.iter().sum()
}
