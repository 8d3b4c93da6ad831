//! What baton does for the people who run it rather than for its clients:
//! alerts to webhooks when something needs a person, and drills that
//! exercise the fallback paths on a schedule.

pub mod alerts;
pub mod drills;

use std::sync::Arc;

use serde_json::Value;

use crate::config::Config;
use crate::observe::Metrics;
use alerts::Alerts;
use drills::{Board, DrillContext};

/// The alerts and the drills of one proxy; cheap to clone.
#[derive(Clone, Default)]
pub struct Ops {
    alerts: Alerts,
    board: Arc<Board>,
    /// The scheduled drills' context, once they are started; their tasks
    /// end when the last handle is gone.
    drills: Option<Arc<DrillContext>>,
}

impl Ops {
    /// The alerts `config` asks for, delivered from a task on the current
    /// runtime, and an empty record of its drills (not yet started).
    pub fn start(config: &Config, metrics: Arc<Metrics>) -> Ops {
        Ops {
            alerts: Alerts::start(&config.alerts, metrics),
            board: Arc::new(Board::new(&config.drills)),
            drills: None,
        }
    }

    /// Where alerts are raised.
    pub fn alerts(&self) -> &Alerts {
        &self.alerts
    }

    /// Each drill's last result, shared with the scheduler.
    pub fn board(&self) -> &Arc<Board> {
        &self.board
    }

    /// The same, with the drills of `context`'s config running on their schedule.
    pub fn with_drills(mut self, context: DrillContext) -> Ops {
        self.drills = Some(context.start());
        self
    }

    /// The drills as `/admin/status` shows them.
    pub fn drills_status(&self) -> Vec<Value> {
        self.board.status()
    }
}
