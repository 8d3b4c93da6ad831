//! The windows spend is summed over: a minute, an hour and a day, each
//! sliding with the clock. Every scope's spend is kept over all three, so
//! a budget over any of them can be checked without keeping more.

use std::time::Duration;

/// The span of time a budget's spend is summed over, sliding with the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetWindow {
    /// The last minute.
    Minute,
    /// The last hour.
    Hour,
    /// The last 24 hours.
    Day,
}

impl BudgetWindow {
    /// Every window, shortest first: each scope's spend is kept over all three.
    pub const ALL: [BudgetWindow; 3] = [BudgetWindow::Minute, BudgetWindow::Hour, BudgetWindow::Day];

    /// How long the window is.
    pub fn duration(self) -> Duration {
        match self {
            BudgetWindow::Minute => Duration::from_secs(60),
            BudgetWindow::Hour => Duration::from_secs(3600),
            BudgetWindow::Day => Duration::from_secs(86_400),
        }
    }

    /// Its name in the config, in errors and on the status page.
    pub fn label(self) -> &'static str {
        match self {
            BudgetWindow::Minute => "1m",
            BudgetWindow::Hour => "1h",
            BudgetWindow::Day => "1d",
        }
    }

    /// Its position in [`BudgetWindow::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The window a config names by its label (`1m`, `1h`, `1d`).
    pub fn from_label(label: &str) -> Option<Self> {
        BudgetWindow::ALL.into_iter().find(|window| window.label() == label)
    }
}
