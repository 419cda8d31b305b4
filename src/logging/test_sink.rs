//! An in-memory log destination for the logging unit tests.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone, Default)]
pub struct SharedSink(Arc<Mutex<Vec<u8>>>);

impl SharedSink {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("sink lock").clone()).expect("utf-8 logs")
    }
}

impl Write for SharedSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("sink lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for SharedSink {
    type Writer = SharedSink;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}
