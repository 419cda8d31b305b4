use super::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn store() -> (tempfile::TempDir, JobsStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = JobsStore::new(dir.path().join("cron"));
    (dir, store)
}

#[test]
fn unknown_fields_survive_a_rewrite_in_their_order() {
    let (_dir, store) = store();
    store.ensure_dirs().unwrap();
    let original = r#"{"jobs": [{"id": "a1b2c3d4e5f6", "zeta": 1, "name": "x", "future_field": {"k": [1, 2]}, "enabled": true}], "updated_at": "2026-01-01T00:00:00+00:00"}"#;
    std::fs::write(store.jobs_path(), original).unwrap();
    store
        .update("2026-01-02T00:00:00+00:00", |file| {
            file.jobs[0].set("enabled", json!(false));
        })
        .unwrap();
    let text = std::fs::read_to_string(store.jobs_path()).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    let job = &value["jobs"][0];
    assert_eq!(job["future_field"], json!({"k": [1, 2]}));
    assert_eq!(job["enabled"], json!(false));
    assert_eq!(value["updated_at"], "2026-01-02T00:00:00+00:00");
    let order: Vec<&str> = [
        "\"id\"",
        "\"zeta\"",
        "\"name\"",
        "\"future_field\"",
        "\"enabled\"",
    ]
    .into_iter()
    .collect();
    let positions: Vec<usize> = order.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    let mode = std::fs::metadata(store.jobs_path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_bare_list_and_a_byte_order_mark_are_read() {
    let (_dir, store) = store();
    store.ensure_dirs().unwrap();
    std::fs::write(store.jobs_path(), b"\xEF\xBB\xBF[{\"id\": \"x\"}]").unwrap();
    assert_eq!(store.load().unwrap().jobs[0].id(), "x");
    assert!(store.load().is_ok());
    std::fs::remove_file(store.jobs_path()).unwrap();
    assert!(
        store.load().unwrap().jobs.is_empty(),
        "absent file is empty"
    );
}

#[test]
fn a_corrupt_file_is_reported_then_kept_aside_never_overwritten() {
    let (_dir, store) = store();
    store.ensure_dirs().unwrap();
    std::fs::write(store.jobs_path(), "{\"jobs\": [ {\"id\": ").unwrap();
    let err = store.load().unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("left untouched"));
    // An update refuses to run on it (it cannot load) and leaves the bytes as they were.
    assert!(store.update("now", |_| ()).is_err());
    assert_eq!(
        std::fs::read_to_string(store.jobs_path()).unwrap(),
        "{\"jobs\": [ {\"id\": "
    );
    // A save (e.g. a new job added by the owner after seeing the error) moves it aside first.
    let lock = store.lock().unwrap();
    store.save(&lock, &JobsFile::default(), "now").unwrap();
    let kept: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("jobs.json.corrupt-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        std::fs::read_to_string(kept[0].path()).unwrap(),
        "{\"jobs\": [ {\"id\": "
    );
}

#[test]
fn the_lock_excludes_a_second_holder_until_released() {
    let (_dir, store) = store();
    let held = store.lock().unwrap();
    let other = std::fs::OpenOptions::new()
        .append(true)
        .open(store.dir().join(".jobs.lock"))
        .unwrap();
    assert!(matches!(
        other.try_lock(),
        Err(std::fs::TryLockError::WouldBlock)
    ));
    drop(held);
    other.try_lock().unwrap();
}

#[test]
fn jobs_written_as_read_come_out_as_a_full_rewrite_would_write_them() {
    let (_dir, store) = store();
    store.ensure_dirs().unwrap();
    let original = r#"{"jobs": [{"id": "a1", "zeta": 1, "name": "x", "nested": {"k": [1, 2.5, "é"]}},
        {"id": "b2", "future": null, "enabled": true}], "updated_at": "t0"}"#;
    std::fs::write(store.jobs_path(), original).unwrap();
    let lock = store.lock().unwrap();
    let mut full = store.load().unwrap();
    full.jobs[1].set("enabled", json!(false));
    store.save(&lock, &full, "t1").unwrap();
    let rewritten = std::fs::read_to_string(store.jobs_path()).unwrap();

    std::fs::write(store.jobs_path(), original).unwrap();
    let bytes = std::fs::read(store.jobs_path()).unwrap();
    let jobs = raw::split(&bytes).unwrap();
    let mut changed = raw::record(jobs[1]);
    changed.set("enabled", json!(false));
    store
        .save_items(&lock, &[Item::Raw(jobs[0]), Item::Record(&changed)], "t1")
        .unwrap();
    let streamed = std::fs::read_to_string(store.jobs_path()).unwrap();
    assert_eq!(streamed, rewritten);
    assert!(
        streamed.find("\"zeta\"") < streamed.find("\"name\""),
        "{streamed}"
    );
}
