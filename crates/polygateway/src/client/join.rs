//! Run futures with at most `limit` in flight, results in input order, stopping at the first
//! error. A dozen lines here instead of the `futures` crate for `buffered` + `try_collect`.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

/// Drive `futures`, at most `limit` at a time, and return their outputs in input order — or
/// the first error, dropping (cancelling) the futures still running.
///
/// Cancel safety: dropping the returned future drops every future it is running.
pub(crate) async fn try_join_bounded<F, T, E>(futures: Vec<F>, limit: usize) -> Result<Vec<T>, E>
where
    F: Future<Output = Result<T, E>>,
{
    let total = futures.len();
    let mut waiting = futures.into_iter().enumerate();
    let mut running: Vec<(usize, Pin<Box<F>>)> = Vec::with_capacity(limit.min(total));
    let mut results: Vec<Option<T>> = (0..total).map(|_| None).collect();
    let mut done = 0;
    poll_fn(|cx| {
        loop {
            while running.len() < limit.max(1) {
                match waiting.next() {
                    Some((i, future)) => running.push((i, Box::pin(future))),
                    None => break,
                }
            }
            let mut progressed = false;
            let mut k = 0;
            while k < running.len() {
                match running[k].1.as_mut().poll(cx) {
                    Poll::Ready(Ok(value)) => {
                        results[running[k].0] = Some(value);
                        running.swap_remove(k);
                        done += 1;
                        progressed = true;
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => k += 1,
                }
            }
            if done == total {
                let values = results
                    .iter_mut()
                    .map(|r| r.take().expect("every index completed once"))
                    .collect();
                return Poll::Ready(Ok(values));
            }
            if !progressed {
                return Poll::Pending;
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn keeps_input_order_and_the_limit() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let futures: Vec<_> = [30u64, 10, 20, 5, 1]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| {
                let (running, peak) = (running.clone(), peak.clone());
                async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, ()>(i)
                }
            })
            .collect();
        assert_eq!(try_join_bounded(futures, 2).await, Ok(vec![0, 1, 2, 3, 4]));
        assert_eq!(peak.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_error_wins_and_drops_the_rest() {
        let dropped = Arc::new(AtomicUsize::new(0));
        struct CountDrop(Arc<AtomicUsize>);
        impl Drop for CountDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let slow = {
            let dropped = dropped.clone();
            async move {
                let _guard = CountDrop(dropped);
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<u32, &str>(1)
            }
        };
        type Boxed = Pin<Box<dyn Future<Output = Result<u32, &'static str>> + Send>>;
        let futures: Vec<Boxed> = vec![Box::pin(slow), Box::pin(async { Err("batch 2 failed") })];
        assert_eq!(try_join_bounded(futures, 4).await, Err("batch 2 failed"));
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(
            try_join_bounded(Vec::<std::future::Ready<Result<u8, ()>>>::new(), 3).await,
            Ok(vec![])
        );
    }
}
