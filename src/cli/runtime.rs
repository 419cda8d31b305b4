//! The tokio runtime the daemon and `hermesd chat` run on.

/// Stack size of each runtime worker thread: 8 MiB, the size Linux gives a process's main
/// thread, instead of the 2 MiB std gives a spawned one.
///
/// A turn is polled through one chain of async frames (session worker → lease holder →
/// turn → agent loop → tool round → approval prompt → delivery). Unoptimised builds keep a
/// separate stack slot for every awaited future in a frame, so that chain measured
/// 1–2 MiB there (objdump of the debug binary: `TurnRunner::run` alone takes 320 KiB) and a
/// worker overflowed the default on a loaded CI machine. The memory is reserved, not used:
/// pages are committed only as the stack reaches them, so resident memory is unchanged.
/// `clippy::large_futures` (threshold in clippy.toml) keeps single futures from growing.
pub const WORKER_STACK_BYTES: usize = 8 << 20;

/// A multi-threaded runtime with every driver and [`WORKER_STACK_BYTES`] per worker.
pub fn multi_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(WORKER_STACK_BYTES)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uses about `depth` × 16 KiB of stack: black_box keeps every frame's buffer alive.
    fn deep(depth: usize) -> u8 {
        let mut buffer = [depth as u8; 16 * 1024];
        std::hint::black_box(&mut buffer);
        if depth == 0 {
            return buffer[0];
        }
        deep(depth - 1).wrapping_add(buffer[depth % buffer.len()])
    }

    #[test]
    fn a_worker_runs_a_task_that_needs_more_than_the_default_two_mib() {
        let runtime = multi_thread().expect("runtime");
        // 4 MiB: twice what a std thread gets, half of what a worker has.
        let depth = (4 << 20) / (16 * 1024);
        let result = runtime.block_on(runtime.spawn(async move { deep(depth) }));
        assert!(result.is_ok(), "the task finished on a worker thread");
    }
}
