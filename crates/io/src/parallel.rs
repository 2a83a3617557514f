//! Work spread over scoped threads: [`run_until_error`], which stops at the first error (how
//! several files are written at once: checkpoint shards, safetensors files, resharded
//! devices), and [`each_in_order`], which does every item and gives the results in the items'
//! order (how a file's chunks are checked or summarized, the first fault reported being the
//! first in the file).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `task` on every item of `items`, on up to `jobs` threads (at least one, at most one per
/// item), each thread taking the next item not yet taken, in the order given (put the largest
/// first to finish soonest). After a task fails, no item is started any more and `stop`, the
/// flag every task is handed, is raised, so that a long task may give up early; once every
/// thread has ended, the first error (in time) is returned. Otherwise the results, in the
/// order the tasks finished.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// let squares = unbound_io::run_until_error(&[1, 2, 3], 2, |&n: &i32, _stop: &AtomicBool| {
///     Ok::<i32, String>(n * n)
/// });
/// let mut squares = squares.unwrap();
/// squares.sort();
/// assert_eq!(squares, [1, 4, 9]);
///
/// let failed = unbound_io::run_until_error(&[1, 2, 3], 1, |&n: &i32, _stop: &AtomicBool| {
///     if n == 2 { Err(format!("item {n}")) } else { Ok(n) }
/// });
/// assert_eq!(failed, Err("item 2".to_string()));
/// ```
pub fn run_until_error<I, T, E>(
    items: &[I],
    jobs: usize,
    task: impl Fn(&I, &AtomicBool) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    I: Sync,
    T: Send,
    E: Send,
{
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let done: Mutex<Vec<T>> = Mutex::new(Vec::with_capacity(items.len()));
    let first_error: Mutex<Option<E>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return;
                    };
                    match task(item, &stop) {
                        Ok(result) => done.lock().unwrap_or_else(|e| e.into_inner()).push(result),
                        Err(error) => {
                            stop.store(true, Ordering::Relaxed);
                            first_error
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .get_or_insert(error);
                        }
                    }
                }
            });
        }
    });
    match first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(error) => Err(error),
        None => Ok(done.into_inner().unwrap_or_else(|e| e.into_inner())),
    }
}

/// `work` of each of `items`, on up to `threads` threads that each take the next item once
/// done with one (so memory holds one item's work per thread: a chunk read, scanned and let
/// go), the results in the items' order (so the first fault in that order is the one a caller
/// reports, whichever thread met it first). A panic in `work` is resumed on the caller's
/// thread.
///
/// ```
/// let doubled = unbound_io::each_in_order(&[1, 2, 3], 2, |&n: &i32| n * 2);
/// assert_eq!(doubled, [2, 4, 6]);
/// ```
pub fn each_in_order<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, work(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, result)| result).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_on_threads_comes_back_in_the_items_order() {
        let items: Vec<u64> = (0..64).collect();
        // Early items take longest, so they finish after later ones.
        let slow_first = |&i: &u64| {
            std::thread::sleep(std::time::Duration::from_micros(64 - i));
            if i % 10 == 7 {
                Err(i)
            } else {
                Ok(i * 2)
            }
        };
        for threads in [0, 1, 2, 5] {
            let each = each_in_order(&items, threads, slow_first);
            let one_by_one: Vec<_> = items.iter().map(slow_first).collect();
            assert_eq!(each, one_by_one, "{threads} threads");
            let first_fault: Result<Vec<u64>, u64> = each.into_iter().collect();
            assert_eq!(first_fault, Err(7));
        }
    }

    #[test]
    fn every_item_runs_once_on_any_number_of_threads() {
        let items: Vec<usize> = (0..100).collect();
        for jobs in [0, 1, 3, 200] {
            let mut got = run_until_error(&items, jobs, |&i, _| Ok::<_, ()>(i)).unwrap();
            got.sort();
            assert_eq!(got, items, "{jobs} jobs");
        }
        assert!(run_until_error(&[] as &[u8], 4, |_, _| Ok::<_, ()>(()))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn after_an_error_no_item_starts_and_running_ones_see_stop() {
        let started = AtomicUsize::new(0);
        let items: Vec<usize> = (0..1000).collect();
        let result = run_until_error(&items, 1, |&i, stop| {
            started.fetch_add(1, Ordering::Relaxed);
            assert!(!stop.load(Ordering::Relaxed));
            if i == 10 {
                Err(i)
            } else {
                Ok(i)
            }
        });
        assert_eq!(result, Err(10));
        assert_eq!(started.load(Ordering::Relaxed), 11);

        // Two threads: the one still running sees `stop` raised and gives up.
        let result = run_until_error(&[0usize, 1], 2, |&i, stop| {
            if i == 0 {
                return Err::<(), _>("first");
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            Err("gave up")
        });
        assert_eq!(result, Err("first"));
    }
}
