//! First-come, first-served hand-off of the write lock between hermesd processes.
//!
//! SQLite and plain `flock` both wake waiting writers in no particular order, so under
//! contention an unlucky writer can lose the race many times in a row. This gate is a CLH
//! queue lock over small lock files beside the database (`<db>-writer/`): a writer takes a
//! ticket from a counter (under its own short lock), locks the queue slot of its ticket, then
//! blocks on its predecessor's slot, which is released only when the predecessor's
//! transaction has finished. Waiting costs no CPU, the kernel releases every lock of a
//! killed process, and the order of service is the order of arrival. Other programs (the
//! Python Hermes) do not take part; SQLite's own lock still arbitrates with them.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Queue slots; more concurrent hermesd writers than this still work (they queue on the
/// slot lock), they just lose strict ordering among themselves.
const SLOTS: u64 = 8;

/// The gate files of one database.
#[derive(Debug)]
pub struct FifoGate {
    counter: File,
    slots: Vec<File>,
}

/// Holding the gate: our slot stays locked until this is dropped.
#[derive(Debug)]
pub struct Turn<'a> {
    slot: &'a File,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let _ = self.slot.unlock();
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    crate::home::private::open_options()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
}

impl FifoGate {
    /// Opens (creating) the gate directory beside `db_path`.
    pub fn open(db_path: &Path) -> std::io::Result<Self> {
        let mut name = db_path.file_name().unwrap_or_default().to_os_string();
        name.push("-writer");
        let dir: PathBuf = db_path.with_file_name(name);
        crate::home::private::create_dir_all(&dir)?;
        let counter = open(&dir.join("ticket"))?;
        let slots = (0..SLOTS)
            .map(|i| open(&dir.join(format!("slot{i}"))))
            .collect::<std::io::Result<_>>()?;
        Ok(Self { counter, slots })
    }

    /// Waits for this writer's turn, in arrival order.
    pub fn enter(&self) -> std::io::Result<Turn<'_>> {
        let ticket = {
            self.counter.lock()?;
            let taken = self.take_ticket();
            let ticket = match taken {
                Ok(ticket) => ticket,
                Err(e) => {
                    let _ = self.counter.unlock();
                    return Err(e);
                }
            };
            // Our slot is locked before the counter is released, so whoever takes the next
            // ticket is sure to find it held.
            let own = &self.slots[(ticket % SLOTS) as usize];
            let locked = own.lock();
            let _ = self.counter.unlock();
            locked?;
            ticket
        };
        let own = &self.slots[(ticket % SLOTS) as usize];
        let predecessor = &self.slots[((ticket + SLOTS - 1) % SLOTS) as usize];
        // Blocks until the previous ticket's holder has finished (or died).
        if let Err(e) = predecessor.lock() {
            let _ = own.unlock();
            return Err(e);
        }
        let _ = predecessor.unlock();
        Ok(Turn { slot: own })
    }

    fn take_ticket(&self) -> std::io::Result<u64> {
        let mut bytes = [0u8; 8];
        let read = self.counter.read_at(&mut bytes, 0)?;
        let ticket = if read == 8 {
            u64::from_le_bytes(bytes)
        } else {
            0
        };
        self.counter
            .write_at(&ticket.wrapping_add(1).to_le_bytes(), 0)?;
        Ok(ticket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn serves_in_arrival_order_across_handles() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let first = FifoGate::open(&db).unwrap();
        let held = first.enter().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..3 {
            let (db, order) = (db.clone(), Arc::clone(&order));
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            waiters.push(std::thread::spawn(move || {
                let gate = FifoGate::open(&db).unwrap();
                // Announce after taking the ticket is impossible to observe from outside,
                // so the main thread waits for the counter to move instead.
                ready_tx.send(()).unwrap();
                let _turn = gate.enter().unwrap();
                order.lock().unwrap().push(i);
            }));
            ready_rx.recv().unwrap();
            // Wait until this waiter holds its ticket before starting the next one.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let mut bytes = [0u8; 8];
                first.counter.read_at(&mut bytes, 0).unwrap();
                if u64::from_le_bytes(bytes) >= i as u64 + 2 {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "waiter {i} never queued"
                );
                std::thread::yield_now();
            }
        }
        drop(held);
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2]);
    }
}
