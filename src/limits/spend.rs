//! Spend over sliding windows. A window is cut into 60 slices and summed
//! over the last 61 of them, so what it counts always covers the whole
//! window that ends now (a little more, never less): spend can never slip
//! past a budget at a boundary the way a fixed window lets twice through
//! at its edge, and a spent budget frees up slice by slice, with a wait
//! that can be told to the client.

use std::time::Duration;

use tokio::time::Instant;

use super::BudgetWindow;

/// Slices a window is cut into.
const SLICES: u32 = 60;
/// Slices summed: the window's, plus the one being filled.
const KEPT: usize = SLICES as usize + 1;
/// The index of the slice being filled at the window's origin: the `KEPT`
/// slices before it exist, empty, so spend from before the start (read from
/// the ledger) has somewhere to go.
const FIRST: u64 = KEPT as u64;

/// The spend of one scope over one window.
#[derive(Debug, Clone)]
pub struct SpendWindow {
    origin: Instant,
    slice: Duration,
    spend: [f64; KEPT],
    /// The slice being filled, counted in slices since `origin`, from [`FIRST`].
    head: u64,
}

impl SpendWindow {
    /// An empty window of `length`, sliding from now.
    pub fn new(length: Duration) -> Self {
        let slice = (length / SLICES).max(Duration::from_millis(1));
        SpendWindow { origin: Instant::now(), slice, spend: [0.0; KEPT], head: FIRST }
    }

    /// Adds `usd` spent `age` before `now` (spend from before a restart),
    /// into the slice it would have gone to then; spend older than the
    /// window is ignored.
    pub fn add_past(&mut self, usd: f64, age: Duration, now: Instant) {
        self.advance(now);
        let back = u64::try_from(age.as_nanos() / self.slice.as_nanos().max(1)).unwrap_or(u64::MAX);
        if back >= KEPT as u64 {
            return;
        }
        let bucket = &mut self.spend[slot(self.head - back)];
        *bucket = add_usd(*bucket, usd);
    }

    /// Adds `usd` spent at `now`.
    pub fn add(&mut self, usd: f64, now: Instant) {
        self.advance(now);
        let bucket = &mut self.spend[slot(self.head)];
        *bucket = add_usd(*bucket, usd);
    }

    /// What was spent over the window that ends at `now`.
    pub fn total(&mut self, now: Instant) -> f64 {
        self.advance(now);
        self.spend.iter().fold(0.0, |sum, usd| add_usd(sum, *usd))
    }

    /// How long until less than `limit` is spent, if at least that is now.
    pub fn wait_below(&mut self, limit: f64, now: Instant) -> Option<Duration> {
        let mut left = self.total(now);
        if left < limit {
            return None;
        }
        // Oldest first: each slice leaves the sum once KEPT newer ones have begun.
        for index in self.head.saturating_sub(KEPT as u64 - 1)..=self.head {
            left -= self.spend[slot(index)];
            if left < limit {
                let leaves = self.slice_start(index.saturating_add(KEPT as u64));
                return Some(leaves.saturating_duration_since(now));
            }
        }
        Some(self.slice_start(self.head.saturating_add(KEPT as u64)).saturating_duration_since(now))
    }

    /// Moves the window to `now`, clearing the slices that fell out.
    fn advance(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.origin).as_nanos();
        let index = u64::try_from(elapsed / self.slice.as_nanos().max(1)).unwrap_or(u64::MAX).saturating_add(FIRST);
        if index <= self.head {
            return;
        }
        let cleared = (index - self.head).min(KEPT as u64);
        for step in 1..=cleared {
            self.spend[slot(self.head.saturating_add(step))] = 0.0;
        }
        self.head = index;
    }

    fn slice_start(&self, index: u64) -> Instant {
        let offset = self.slice.saturating_mul(u32::try_from(index.saturating_sub(FIRST)).unwrap_or(u32::MAX));
        crate::clock::later(self.origin, offset)
    }
}

/// `a + b` for amounts of money, saturating at `f64::MAX` rather than
/// reaching infinity, so no total ever becomes unusable.
pub fn add_usd(a: f64, b: f64) -> f64 {
    let sum = a + b;
    if sum.is_finite() { sum.max(0.0) } else { f64::MAX }
}

fn slot(index: u64) -> usize {
    usize::try_from(index % KEPT as u64).unwrap_or(0)
}

/// One scope's spend: over each window, and since the start.
#[derive(Debug, Clone)]
pub struct Spend {
    windows: [SpendWindow; 3],
    total: f64,
    /// When a `warn` budget over each window last logged.
    warned: [Option<Instant>; 3],
}

impl Default for Spend {
    fn default() -> Self {
        Spend {
            windows: BudgetWindow::ALL.map(|window| SpendWindow::new(window.duration())),
            total: 0.0,
            warned: [None; 3],
        }
    }
}

impl Spend {
    /// Adds `usd` spent at `now` to every window and the total.
    pub fn add(&mut self, usd: f64, now: Instant) {
        self.windows.iter_mut().for_each(|window| window.add(usd, now));
        self.total = add_usd(self.total, usd);
    }

    /// Adds `usd` spent `age` before `now` to the windows in `windows` (the
    /// ledger's spend, read at start); the total stays this run's.
    pub fn add_past(&mut self, usd: f64, age: Duration, windows: &[BudgetWindow], now: Instant) {
        for window in windows {
            self.windows[window.index()].add_past(usd, age, now);
        }
    }

    /// What was spent over `window`, ending now.
    pub fn over(&mut self, window: BudgetWindow, now: Instant) -> f64 {
        self.windows[window.index()].total(now)
    }

    /// How long until less than `limit` is spent over `window`.
    pub fn wait_below(&mut self, window: BudgetWindow, limit: f64, now: Instant) -> Option<Duration> {
        self.windows[window.index()].wait_below(limit, now)
    }

    /// Everything spent since the start.
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Whether a warning about `window` is due: none has been given within
    /// the last window. Marks it given.
    pub fn warn_due(&mut self, window: BudgetWindow, now: Instant) -> bool {
        let last = &mut self.warned[window.index()];
        let due = last.is_none_or(|at| now.saturating_duration_since(at) >= window.duration());
        if due {
            *last = Some(now);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn spend_leaves_the_window_a_window_after_it_was_made() {
        let mut window = SpendWindow::new(MINUTE);
        window.add(3.0, Instant::now());
        tokio::time::advance(Duration::from_secs(30)).await;
        window.add(2.0, Instant::now());
        assert_eq!(window.total(Instant::now()), 5.0);
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(window.total(Instant::now()), 2.0, "the first spend is over a minute old");
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(window.total(Instant::now()), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn no_window_edge_lets_twice_the_budget_through() {
        for window in BudgetWindow::ALL {
            let length = window.duration();
            let mut spend = SpendWindow::new(length);
            // All of it just before a fixed window's edge, then a check just after.
            tokio::time::advance(length - Duration::from_millis(100)).await;
            spend.add(10.0, Instant::now());
            tokio::time::advance(Duration::from_millis(200)).await;
            assert_eq!(spend.total(Instant::now()), 10.0, "{}: a fixed window would have reset", window.label());
            tokio::time::advance(length / 2).await;
            assert_eq!(spend.total(Instant::now()), 10.0, "{}: still within the window", window.label());
            tokio::time::advance(length / 2 + length / 30).await;
            assert_eq!(spend.total(Instant::now()), 0.0, "{}: a window and a slice later it is gone", window.label());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_until_enough_old_spend_has_left() {
        let mut window = SpendWindow::new(MINUTE);
        window.add(6.0, Instant::now());
        tokio::time::advance(Duration::from_secs(20)).await;
        window.add(6.0, Instant::now());
        assert_eq!(window.wait_below(20.0, Instant::now()), None, "12 of 20 spent: no wait");
        let wait = window.wait_below(10.0, Instant::now()).expect("12 of 10 spent");
        assert!(
            wait > Duration::from_secs(40) && wait <= Duration::from_secs(41),
            "the first 6 leave in ~40 s: {wait:?}"
        );
        tokio::time::advance(wait).await;
        assert!(window.total(Instant::now()) < 10.0, "and then the budget has room");
    }

    #[tokio::test(start_paused = true)]
    async fn a_warning_is_due_once_per_window() {
        let mut spend = Spend::default();
        let now = Instant::now();
        assert!(spend.warn_due(BudgetWindow::Minute, now));
        assert!(!spend.warn_due(BudgetWindow::Minute, now));
        assert!(spend.warn_due(BudgetWindow::Hour, now), "each window warns on its own");
        tokio::time::advance(MINUTE).await;
        assert!(spend.warn_due(BudgetWindow::Minute, Instant::now()));
        assert!(!spend.warn_due(BudgetWindow::Hour, Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn spend_from_before_the_start_leaves_when_it_would_have() {
        let mut window = SpendWindow::new(MINUTE);
        window.add_past(4.0, Duration::from_secs(50), Instant::now());
        window.add_past(100.0, Duration::from_secs(62), Instant::now());
        window.add(1.0, Instant::now());
        assert_eq!(window.total(Instant::now()), 5.0, "what is over a minute old is not counted");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(window.total(Instant::now()), 1.0, "the past spend left ~60 s after it was made");
        let mut spend = Spend::default();
        spend.add_past(7.0, Duration::from_secs(1800), &[BudgetWindow::Hour, BudgetWindow::Day], Instant::now());
        assert_eq!(spend.over(BudgetWindow::Minute, Instant::now()), 0.0, "only the windows named");
        assert_eq!((spend.over(BudgetWindow::Hour, Instant::now()), spend.total()), (7.0, 0.0));
    }

    #[test]
    fn absurd_amounts_saturate() {
        let mut spend = Spend::default();
        spend.add(f64::MAX, Instant::now());
        spend.add(f64::MAX, Instant::now());
        assert_eq!(spend.total(), f64::MAX);
        assert_eq!(spend.over(BudgetWindow::Day, Instant::now()), f64::MAX);
    }
}
