//! A minimal `tracing` subscriber that keeps every event as text, to assert what is (and is
//! not) logged. Shared by the unit and integration tests of this crate.

use std::sync::{Arc, Mutex};

/// Every event recorded while it was the default subscriber: level, then `field=value` pairs.
#[derive(Clone, Default)]
pub(crate) struct Capture(pub(crate) Arc<Mutex<Vec<String>>>);

impl Capture {
    /// The lines recorded so far.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.0.lock().expect("capture lock").clone()
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields(format!("SPAN {} ", span.metadata().name()));
        span.record(&mut fields);
        self.0.lock().expect("capture lock").push(fields.0);
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Fields("RECORD ".to_owned());
        values.record(&mut fields);
        self.0.lock().expect("capture lock").push(fields.0);
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(format!("{} ", event.metadata().level()));
        event.record(&mut fields);
        self.0.lock().expect("capture lock").push(fields.0);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={:?} ", field.name(), value));
    }
}
