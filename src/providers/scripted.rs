//! Providers that follow a script instead of a wire: an [`Opener`] whose
//! answers (events, waits, failures, silence) the test writes, so the real
//! engine — deadlines, commit, hedging, retries, resume, breakers — can be
//! driven on paused time with exact virtual instants.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::stream;
use tokio::time::Instant;

use super::{EventStream, Opener, Opening, ProviderError, ProviderKind, Upstream};
use crate::event::{ChatRequest, Event, FinishReason};

/// One step of a scripted answer.
#[derive(Debug)]
enum Step {
    Event(Event),
    Wait(Duration),
    Fail(ProviderError),
    Silence,
}

/// What a scripted provider does for one request.
#[derive(Debug)]
pub struct Script {
    /// How long opening takes (connect and response head).
    opening: Duration,
    /// Opening fails with this instead of answering.
    refusal: Option<ProviderError>,
    steps: Vec<Step>,
}

impl Script {
    /// An answer that opens at once and has no events yet.
    pub fn answer() -> Self {
        Script { opening: Duration::ZERO, refusal: None, steps: Vec::new() }
    }

    /// Opening fails with `error` (a status, a refused connection).
    pub fn fails(error: ProviderError) -> Self {
        Script { opening: Duration::ZERO, refusal: Some(error), steps: Vec::new() }
    }

    /// Opening takes `wait` before the answer (or the failure) comes.
    pub fn opening_after(mut self, wait: Duration) -> Self {
        self.opening = wait;
        self
    }

    /// A text delta.
    pub fn text(mut self, text: &str) -> Self {
        self.steps.push(Step::Event(Event::Text(text.to_owned())));
        self
    }

    /// A pause before the next step.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.steps.push(Step::Wait(wait));
        self
    }

    /// Any event.
    pub fn event(mut self, event: Event) -> Self {
        self.steps.push(Step::Event(event));
        self
    }

    /// The stream fails with `error` here.
    pub fn then_fails(mut self, error: ProviderError) -> Self {
        self.steps.push(Step::Fail(error));
        self
    }

    /// The stream goes silent here, for good.
    pub fn then_silent(mut self) -> Self {
        self.steps.push(Step::Silence);
        self
    }

    /// Ends the answer with a finish reason (the stream then ends).
    pub fn finish(self) -> Self {
        self.event(Event::Finish(FinishReason::Stop))
    }
}

/// One request a scripted provider saw.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The upstream model asked for (each test target has its own).
    pub model: String,
    /// When the request arrived, in the runtime's (paused) time.
    pub at: Instant,
    /// The request as the provider got it.
    pub request: ChatRequest,
}

/// Scripted providers, one per upstream model: each request takes the next
/// script of its model (the last one repeats).
#[derive(Debug, Default)]
pub struct Scripted {
    scripts: Mutex<HashMap<String, VecDeque<Script>>>,
    last: Mutex<HashMap<String, Script>>,
    opened: Mutex<Vec<Opened>>,
    dropped: Arc<AtomicUsize>,
}

impl Scripted {
    /// No scripts yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Scripted::default())
    }

    /// Queues `script` for the next request to `model`.
    pub fn then(&self, model: &str, script: Script) -> &Self {
        self.scripts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(model.to_owned())
            .or_default()
            .push_back(script);
        self
    }

    /// Every request so far, in order.
    pub fn opened(&self) -> Vec<Opened> {
        self.opened.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many requests `model` saw.
    pub fn opened_for(&self, model: &str) -> usize {
        self.opened().iter().filter(|o| o.model == model).count()
    }

    /// Answers dropped before their end (a lost hedge, a client gone, a deadline).
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    fn next_script(&self, model: &str) -> Option<Script> {
        let queued = self.scripts.lock().unwrap_or_else(PoisonError::into_inner).get_mut(model)?.pop_front();
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match queued {
            Some(script) => {
                last.insert(model.to_owned(), script.replay());
                Some(script)
            }
            None => last.get(model).map(Script::replay),
        }
    }
}

impl Script {
    /// The same script again, for a model whose queue ran out.
    fn replay(&self) -> Script {
        let step = |step: &Step| match step {
            Step::Event(event) => Step::Event(event.clone()),
            Step::Wait(wait) => Step::Wait(*wait),
            Step::Fail(error) => Step::Fail(error.clone()),
            Step::Silence => Step::Silence,
        };
        Script { opening: self.opening, refusal: self.refusal.clone(), steps: self.steps.iter().map(step).collect() }
    }
}

impl Opener for Scripted {
    fn open<'a>(&'a self, _kind: ProviderKind, upstream: Upstream<'a>, request: &'a ChatRequest) -> Opening<'a> {
        let opened = Opened { model: upstream.model.to_owned(), at: Instant::now(), request: request.clone() };
        self.opened.lock().unwrap_or_else(PoisonError::into_inner).push(opened);
        let script = self.next_script(upstream.model);
        let dropped = Arc::clone(&self.dropped);
        Box::pin(async move {
            let Some(script) = script else {
                return Err(ProviderError::Connect(format!("no script for model {:?}", upstream.model)));
            };
            tokio::time::sleep(script.opening).await;
            if let Some(error) = script.refusal {
                return Err(error);
            }
            Ok(play(script.steps, dropped))
        })
    }
}

/// Plays `steps` as an event stream; a stream dropped before its end counts in `dropped`.
fn play(steps: Vec<Step>, dropped: Arc<AtomicUsize>) -> EventStream {
    let state = Playing { steps: steps.into(), dropped, over: false };
    Box::pin(stream::unfold(state, |mut state| async move {
        loop {
            match state.steps.pop_front() {
                None => {
                    state.end();
                    return None;
                }
                Some(Step::Event(event)) => return Some((Ok(event), state)),
                Some(Step::Wait(wait)) => tokio::time::sleep(wait).await,
                Some(Step::Fail(error)) => {
                    state.over = true;
                    return Some((Err(error), state));
                }
                Some(Step::Silence) => std::future::pending::<()>().await,
            }
        }
    }))
}

struct Playing {
    steps: VecDeque<Step>,
    dropped: Arc<AtomicUsize>,
    over: bool,
}

impl Playing {
    /// The script was played to its end: dropping it now is no cancellation.
    fn end(mut self) {
        self.over = true;
    }
}

impl Drop for Playing {
    fn drop(&mut self) {
        if !self.over {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }
}
