//! Hermes's `jobs.json` in and out of the shared database (issue 28, defect 8): with
//! `state.backend: postgres`, `hermesd cron import` takes a jobs file the Python `hermes cron`
//! wrote, every home on the database lists it, and `hermesd cron export` writes the jobs
//! back byte for byte where the Python CLI reads and edits them. The first home to use the
//! database brings its jobs along; later homes never overwrite them; an import or export
//! that cannot be done says why and changes nothing; jobs that are not valid JSON are
//! reported, never seeded and never overwritten. Real binaries on a private PostgreSQL.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use support::daemon::{HERMESD, base_env};
use support::postgres::PgCluster;

/// A home whose state (and so its jobs) is in the database its commands are given.
fn shared_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        home.path().join("config.yaml"),
        "state:\n  backend: postgres\n",
    )
    .expect("config.yaml");
    home
}

/// `hermesd cron ARGS` on `home`, with the database URL when there is one.
fn cron(home: &Path, database: Option<&PgCluster>, args: &[&str]) -> Output {
    let mut command = Command::new(HERMESD);
    command
        .arg("cron")
        .args(args)
        .env_clear()
        .envs(base_env(home));
    if let Some(cluster) = database {
        command.env("HERMES_DATABASE_URL", cluster.url());
    }
    command.output().expect("run hermesd cron")
}

/// As [`cron`], which must succeed; its standard output.
fn cron_ok(home: &Path, database: Option<&PgCluster>, args: &[&str]) -> String {
    let out = cron(home, database, args);
    assert!(
        out.status.success(),
        "hermesd cron {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// As [`cron`], which must exit 1 with one `error:` line containing `expected`.
fn cron_refused(home: &Path, database: Option<&PgCluster>, args: &[&str], expected: &str) {
    let out = cron(home, database, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hermesd cron {args:?}: {stderr}"
    );
    // (Log lines, such as the database's notices, may come before it.)
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert!(
        errors.len() == 1 && errors[0].contains(expected),
        "hermesd cron {args:?}: {stderr}"
    );
}

/// The names of the jobs `home` lists.
fn names(home: &Path, database: &PgCluster) -> Vec<String> {
    let out = cron_ok(home, Some(database), &["list", "--json"]);
    let jobs: Value = serde_json::from_str(&out).expect("JSON");
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|job| job["name"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `hermes ARGS` from the reference venv, on `home`, which must succeed; its output.
fn hermes(home: &Path, args: &[&str]) -> String {
    let python = support::python::python();
    let bin = Path::new(&python).with_file_name("hermes");
    let out = Command::new(bin)
        .args(args)
        .env_clear()
        .env("HERMES_HOME", home)
        .env("HOME", home.join("user"))
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .output()
        .expect("run the Python hermes CLI");
    assert!(
        out.status.success(),
        "hermes {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn hermes_jobs_go_into_the_shared_database_and_come_back_out_byte_for_byte() {
    let cluster = PgCluster::start();
    // A job the Python CLI made on a home of its own.
    let python_home = tempfile::tempdir().unwrap();
    hermes(
        python_home.path(),
        &[
            "cron",
            "create",
            "every 2h",
            "check the feed",
            "--name",
            "feed",
        ],
    );
    let written_by_hermes = python_home.path().join("cron/jobs.json");
    let hermes_bytes = std::fs::read(&written_by_hermes).unwrap();

    let a = shared_home();
    let b = shared_home();
    let out = cron_ok(
        a.path(),
        Some(&cluster),
        &["import", written_by_hermes.to_str().unwrap()],
    );
    assert!(out.contains("imported 1 job(s)"), "{out}");
    assert_eq!(
        names(b.path(), &cluster),
        ["feed"],
        "B lists what A imported"
    );

    // Unchanged, the jobs come out as the bytes Hermes wrote.
    let out_home = tempfile::tempdir().unwrap();
    let exported = out_home.path().join("cron/jobs.json");
    cron_ok(
        b.path(),
        Some(&cluster),
        &["export", exported.to_str().unwrap()],
    );
    assert_eq!(std::fs::read(&exported).unwrap(), hermes_bytes);

    // A job added on B goes out too, and Hermes reads and edits both.
    let added = cron_ok(
        b.path(),
        Some(&cluster),
        &[
            "add",
            "every 3h",
            "water the plants",
            "--name",
            "plants",
            "--json",
        ],
    );
    let plants: Value = serde_json::from_str(&added).unwrap();
    let plants_id = plants["id"].as_str().unwrap().to_owned();
    let out = cron_ok(
        a.path(),
        Some(&cluster),
        &["export", exported.to_str().unwrap()],
    );
    assert!(out.contains("exported 2 job(s)"), "{out}");
    let listed = hermes(out_home.path(), &["cron", "list"]);
    for expected in ["feed", "plants", plants_id.as_str()] {
        assert!(
            listed.contains(expected),
            "{expected:?} missing from:\n{listed}"
        );
    }
    hermes(out_home.path(), &["cron", "pause", &plants_id]);

    // Hermes's edit comes back in through the default path of a home's own jobs file.
    std::fs::create_dir_all(a.path().join("cron")).unwrap();
    std::fs::copy(&exported, a.path().join("cron/jobs.json")).unwrap();
    cron_ok(a.path(), Some(&cluster), &["import"]);
    let out = cron_ok(b.path(), Some(&cluster), &["list", "--json"]);
    let jobs: Value = serde_json::from_str(&out).unwrap();
    let paused = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|job| job["id"] == plants_id.as_str())
        .expect("plants");
    assert_eq!(paused["enabled"], false, "{paused}");
    assert!(
        !b.path().join("cron/jobs.json").exists(),
        "shared jobs are not written to a home"
    );
}

#[test]
fn the_first_home_seeds_the_shared_jobs_and_a_later_one_never_overwrites_them() {
    let cluster = PgCluster::start();
    // A had jobs on its own before it was pointed at the database.
    let a = tempfile::tempdir().unwrap();
    cron_ok(
        a.path(),
        None,
        &["add", "every 1h", "tidy the inbox", "--name", "inbox"],
    );
    std::fs::write(
        a.path().join("config.yaml"),
        "state:\n  backend: postgres\n",
    )
    .unwrap();
    assert_eq!(names(a.path(), &cluster), ["inbox"]);

    // B had other jobs: the shared ones stay, B's file is named by `status` as unused.
    let b = tempfile::tempdir().unwrap();
    cron_ok(
        b.path(),
        None,
        &["add", "every 1h", "old habit", "--name", "old"],
    );
    std::fs::write(
        b.path().join("config.yaml"),
        "state:\n  backend: postgres\n",
    )
    .unwrap();
    assert_eq!(names(b.path(), &cluster), ["inbox"]);
    let status: Value =
        serde_json::from_str(&cron_ok(b.path(), Some(&cluster), &["status", "--json"])).unwrap();
    assert_eq!(status["shared"], true, "{status}");
    assert_eq!(status["jobs"], 1, "{status}");

    // `doctor` names B's unused file, and not A's (the seed is what the database holds).
    let unused = "differs from the jobs in the shared database";
    let doctor_b = doctor(b.path(), &cluster);
    let b_jobs = b.path().join("cron").join("jobs.json");
    assert!(
        doctor_b
            .lines()
            .any(|l| l.contains(unused) && l.contains(&b_jobs.display().to_string())),
        "{doctor_b}"
    );
    let doctor_a = doctor(a.path(), &cluster);
    assert!(!doctor_a.contains(unused), "{doctor_a}");
}

/// What `hermesd doctor` prints for `home` on the database (its verdict on other checks,
/// such as the unconfigured model, does not matter here).
fn doctor(home: &Path, database: &PgCluster) -> String {
    let out = Command::new(HERMESD)
        .arg("doctor")
        .env_clear()
        .envs(base_env(home))
        .env("HERMES_DATABASE_URL", database.url())
        .output()
        .expect("run hermesd doctor");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_import_or_export_that_cannot_be_done_says_why_and_changes_nothing() {
    let cluster = PgCluster::start();
    let a = shared_home();
    let nowhere = a.path().join("exported/jobs.json");
    cron_refused(
        a.path(),
        Some(&cluster),
        &["export", nowhere.to_str().unwrap()],
        "no jobs are stored in cron/jobs.json in the shared database yet",
    );
    assert!(!nowhere.exists());

    cron_ok(
        a.path(),
        Some(&cluster),
        &["add", "every 1h", "keep me", "--name", "kept"],
    );
    let broken = a.path().join("broken.json");
    std::fs::write(&broken, "{\"jobs\": [ {\"id\": ").unwrap();
    cron_refused(
        a.path(),
        Some(&cluster),
        &["import", broken.to_str().unwrap()],
        "is not a Hermes jobs file",
    );
    cron_refused(
        a.path(),
        Some(&cluster),
        &["import", a.path().join("missing.json").to_str().unwrap()],
        "cannot read",
    );
    assert_eq!(names(a.path(), &cluster), ["kept"], "nothing was imported");

    // On one machine the jobs are the home's file: there is nothing to move it to.
    let solo = tempfile::tempdir().unwrap();
    cron_ok(
        solo.path(),
        None,
        &["add", "every 1h", "alone", "--name", "alone"],
    );
    cron_refused(
        solo.path(),
        None,
        &["export"],
        "is the jobs file this home already uses",
    );
}

/// Runs `work` on a connection pool of `cluster`'s database (what an operator's `psql`
/// would see or do).
fn in_database<T>(cluster: &PgCluster, work: impl AsyncFnOnce(&sqlx::PgPool) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = sqlx::postgres::PgPool::connect(&cluster.url())
            .await
            .expect("connect");
        let result = work(&pool).await;
        pool.close().await;
        result
    })
}

/// The bytes of the shared row `name`, straight from the database.
fn shared_row(cluster: &PgCluster, name: &str) -> Option<Vec<u8>> {
    in_database(cluster, async |pool| {
        sqlx::query_scalar("SELECT body FROM hermesd_shared_files WHERE name = $1")
            .bind(name)
            .fetch_optional(pool)
            .await
            .expect("read a shared row")
    })
}

#[test]
fn corrupt_jobs_are_reported_and_never_overwritten_in_the_database_or_seeded_into_it() {
    let cluster = PgCluster::start();
    // A home whose own file is broken brings nothing along, and says so.
    let a = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(a.path().join("cron")).unwrap();
    std::fs::write(a.path().join("cron/jobs.json"), "{\"jobs\": [").unwrap();
    std::fs::write(
        a.path().join("config.yaml"),
        "state:\n  backend: postgres\n",
    )
    .unwrap();
    let out = cron(a.path(), Some(&cluster), &["list"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("was not copied into the shared database"),
        "{stderr}"
    );
    assert_eq!(shared_row(&cluster, "cron/jobs.json"), None);

    cron_ok(
        a.path(),
        Some(&cluster),
        &["add", "every 1h", "kept", "--name", "kept"],
    );
    let broken = b"{\"jobs\": [ {\"id\": ";
    // The row is damaged behind hermesd's back.
    in_database(&cluster, async |pool| {
        sqlx::query(
            "UPDATE hermesd_shared_files SET body = $1, version = version + 1 \
             WHERE name = 'cron/jobs.json'",
        )
        .bind(&broken[..])
        .execute(pool)
        .await
        .expect("damage the row")
    });
    cron_refused(
        a.path(),
        Some(&cluster),
        &["list"],
        "is not a valid jobs file",
    );
    cron_refused(
        a.path(),
        Some(&cluster),
        &["add", "every 1h", "more", "--name", "more"],
        "left untouched",
    );
    assert_eq!(
        shared_row(&cluster, "cron/jobs.json").as_deref(),
        Some(&broken[..])
    );

    // An import over it keeps the damaged bytes aside first.
    let good = a.path().join("good.json");
    std::fs::write(&good, "{\"jobs\": []}").unwrap();
    cron_ok(
        a.path(),
        Some(&cluster),
        &["import", good.to_str().unwrap()],
    );
    let aside: Vec<String> = in_database(&cluster, async |pool| {
        sqlx::query_scalar(
            "SELECT name FROM hermesd_shared_files WHERE name LIKE 'cron/jobs.json.corrupt-%'",
        )
        .fetch_all(pool)
        .await
        .expect("list the rows kept aside")
    });
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        shared_row(&cluster, &aside[0]).as_deref(),
        Some(&broken[..])
    );
    assert!(names(a.path(), &cluster).is_empty());
}
