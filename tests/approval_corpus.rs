//! The labelled approval corpus (tests/fixtures/approval/corpus.tsv) through the real
//! `terminal` tool: approvals in manual mode, an approval callback that records each question
//! and answers "deny", HOME and HERMES_HOME inside a temp dir. Approval must be asked exactly
//! for the dangerous commands, never for the harmless ones, and a dangerous command must
//! never run (canary files survive, no marker file appears).
//!
//! Harmless commands really run. Programs that would reach the network or take long (cargo,
//! npm, npx, docker, kubectl, pip, systemctl, psql, curl, wget) are stubs in a directory
//! that comes first on PATH; the stubs print one line and exit 0.
//!
//! Before a dangerous command goes to the terminal, the gate is asked about it alone: if it
//! would let it through (a false negative) it is counted and not run, so a miss is reported
//! instead of executed.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd::home::HermesHome;
use hermesd::tools::approval::{
    ApprovalDecision, ApprovalGate, ApprovalOutcome, ApprovalPrompt, ApprovalSettings, DetectionEnv,
};
use hermesd::tools::{ToolCtx, builtin_registry};
use serde_json::{Value, json};

const CORPUS: &str = include_str!("fixtures/approval/corpus.tsv");
const STUBS: &[&str] = &[
    "cargo",
    "npm",
    "npx",
    "docker",
    "kubectl",
    "pip",
    "systemctl",
    "psql",
    "curl",
    "wget",
];
const BASHRC: &str = "# the owner's shell start-up\n";
const AUTHORIZED_KEYS: &str = "ssh-ed25519 AAAAC3Nza owner@laptop\n";
const HERMES_ENV: &str = "TELEGRAM_ALLOWED_USERS=111\n";
const KEEP: &str = "precious\n";

struct Entry {
    label: String,
    command: String,
    line: usize,
}

fn corpus(root: &Path) -> Vec<Entry> {
    CORPUS
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| {
            let mut fields = l.split('\t');
            let label = fields.next().unwrap_or_default().to_owned();
            let command = fields
                .next()
                .unwrap_or_else(|| panic!("line {}: no command", i + 1))
                .replace("{DIR}", &root.display().to_string())
                .replace("{NL}", "\n");
            Entry {
                label,
                command,
                line: i + 1,
            }
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(work: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(args)
        .current_dir(work)
        .env("HOME", work.parent().unwrap().join("home"))
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// The work tree, both homes and the stubs.
fn lay_out(root: &Path) {
    let work = root.join("work");
    write(&work.join("notes.txt"), "alpha\nbeta\nTODO: gamma\n");
    write(&work.join("data.csv"), "a,1\nb,2\na,3\n");
    write(&work.join("src/main.rs"), "fn main() {}\n");
    write(&work.join("src/lib.rs"), "pub fn lib() {}\n");
    write(&work.join("script.py"), "print('ok')\n");
    write(&work.join("script.js"), "console.log('ok')\n");
    write(&work.join("script.sh"), "#!/bin/sh\necho ok\n");
    write(&work.join("env.sh"), "PROJECT=demo\n");
    write(&work.join("package.json"), "{\"name\": \"demo\"}\n");
    write(&work.join("requirements.txt"), "\n");
    write(
        &work.join("Makefile"),
        "all:\n\t@echo built\ntest:\n\t@echo tested\n",
    );
    write(&work.join("single.tmp"), "x\n");
    write(&work.join("other.tmp"), "x\n");
    write(&work.join("payload.b64"), "dG91Y2ggUFdORUQK\n");
    write(&work.join("payload.hex"), "746f7563682050574e45440a\n");
    write(&work.join("victim/keep.txt"), KEEP);
    std::fs::create_dir_all(work.join("emptydir")).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["config", "user.name", "Corpus"]);
    git(&work, &["config", "user.email", "corpus@example.invalid"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "start"]);
    let home = root.join("home");
    write(&home.join(".bashrc"), BASHRC);
    write(&home.join(".profile"), BASHRC);
    write(&home.join(".zshrc"), BASHRC);
    write(&home.join(".gitconfig"), "[core]\n\teditor = vi\n");
    write(&home.join(".netrc"), "machine x login y password z\n");
    write(&home.join(".ssh/authorized_keys"), AUTHORIZED_KEYS);
    write(&home.join(".ssh/id_ed25519"), "PRIVATE\n");
    let hermes = root.join("hermes");
    write(&hermes.join(".env"), HERMES_ENV);
    write(&hermes.join("auth.json"), "{}\n");
    write(&hermes.join("config.yaml"), "approvals:\n  mode: manual\n");
    std::fs::create_dir_all(hermes.join("platforms/pairing")).unwrap();
    std::fs::create_dir_all(hermes.join("scripts")).unwrap();
    let stubs = root.join("stubs");
    for name in STUBS {
        let path = stubs.join(name);
        write(&path, &format!("#!/bin/sh\necho \"{name} stub\"\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// What must still hold after a dangerous command was refused.
fn canaries_intact(root: &Path) -> Result<(), String> {
    let read =
        |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()));
    let checks = [
        (root.join("work/victim/keep.txt"), KEEP),
        (root.join("home/.bashrc"), BASHRC),
        (root.join("home/.profile"), BASHRC),
        (root.join("home/.ssh/authorized_keys"), AUTHORIZED_KEYS),
        (root.join("hermes/.env"), HERMES_ENV),
    ];
    for (path, expected) in checks {
        if read(path.clone())? != expected {
            return Err(format!("{} changed", path.display()));
        }
    }
    for marker in ["work/PWNED", "work/leak.txt", "hermes/scripts/x.sh"] {
        if root.join(marker).exists() {
            return Err(format!("{marker} appeared"));
        }
    }
    let notes = root.join("work/notes.txt");
    let mode = std::fs::metadata(&notes)
        .map_err(|e| e.to_string())?
        .permissions()
        .mode();
    if mode & 0o002 != 0 {
        return Err("notes.txt became world-writable".to_owned());
    }
    Ok(())
}

fn context(root: &Path, asked: Arc<Mutex<Vec<String>>>) -> ToolCtx {
    let mut ctx = ToolCtx::for_tests(root);
    let home = root.join("home");
    let hermes = HermesHome::at(root.join("hermes"));
    let env: BTreeMap<String, String> = [
        (
            "PATH",
            format!(
                "{}:/usr/local/bin:/usr/bin:/bin",
                root.join("stubs").display()
            ),
        ),
        ("HOME", home.display().to_string()),
        ("LANG", "C.UTF-8".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut settings = ApprovalSettings::new(hermes.config_yaml());
    settings.detection = DetectionEnv::new(Some(&home), Some(hermes.path()), Path::new("/tmp"));
    let prompt: ApprovalPrompt = Arc::new(move |request| {
        asked.lock().unwrap().push(request.command.clone());
        Box::pin(async { ApprovalDecision::Deny })
    });
    ctx.approvals = Arc::new(ApprovalGate::new(settings, Some(prompt)));
    ctx.home = hermes;
    ctx.env = env;
    ctx.cwd = root.join("work");
    ctx.limits.terminal_timeout = Duration::from_secs(30);
    ctx
}

async fn run(ctx: &ToolCtx, command: &str) -> Value {
    let registry = builtin_registry();
    let out = registry
        .dispatch(
            "terminal",
            &json!({"command": command}).to_string(),
            ctx.clone(),
        )
        .await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

#[derive(Default)]
struct Tally {
    harmless: usize,
    false_positives: Vec<String>,
    floor: usize,
    dangerous: usize,
    false_negatives: Vec<String>,
    refused: usize,
    failures: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_asked_exactly_for_the_dangerous_commands() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    lay_out(&root);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let ctx = context(&root, Arc::clone(&asked));
    let take_asked = || std::mem::take(&mut *asked.lock().unwrap());
    let mut tally = Tally::default();
    let entries = corpus(&root);
    assert!(
        entries.len() >= 200,
        "the corpus has {} commands",
        entries.len()
    );
    let run_all = async {
        for entry in &entries {
            let command = entry.command.as_str();
            let at = format!("line {}: {command:?}", entry.line);
            take_asked();
            match entry.label.as_str() {
                "harmless" | "floor" => {
                    let result = run(&ctx, command).await;
                    let was_asked = !take_asked().is_empty();
                    let floor = entry.label == "floor";
                    if floor {
                        tally.floor += 1;
                    } else {
                        tally.harmless += 1;
                    }
                    if was_asked {
                        tally.false_positives.push(at.clone());
                    }
                    if was_asked != floor {
                        tally
                            .failures
                            .push(format!("{at}: asked = {was_asked}, {result}"));
                    } else if !floor && result["status"] == "blocked" {
                        tally.failures.push(format!("{at}: did not run: {result}"));
                    }
                }
                "dangerous" | "refused" => {
                    let refused = entry.label == "refused";
                    if refused {
                        tally.refused += 1;
                    } else {
                        tally.dangerous += 1;
                    }
                    let cwd = ctx.shell_cwd();
                    let verdict = ctx
                        .approvals
                        .check_in_dir(&ctx.session_id, command, Some(&cwd), &ctx.cancel)
                        .await;
                    if verdict == ApprovalOutcome::Allowed {
                        tally.false_negatives.push(at.clone());
                        continue;
                    }
                    take_asked();
                    let result = run(&ctx, command).await;
                    let questions = take_asked();
                    let expected: Vec<String> = if refused {
                        Vec::new()
                    } else {
                        vec![command.to_owned()]
                    };
                    if questions != expected {
                        tally.failures.push(format!("{at}: asked {questions:?}"));
                    }
                    if result["status"] != "blocked" {
                        tally.failures.push(format!("{at}: not blocked: {result}"));
                    }
                    if let Err(broken) = canaries_intact(&root) {
                        tally.failures.push(format!("{at}: it ran: {broken}"));
                    }
                }
                other => panic!("line {}: unknown label {other:?}", entry.line),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(600), run_all)
        .await
        .expect("the corpus finished within 10 minutes");
    let ordinary = tally.harmless + tally.floor;
    let rate = 100.0 * tally.false_positives.len() as f64 / ordinary as f64;
    println!(
        "approval corpus: {} harmless + {} floor: {} asked ({rate:.1}% false positives); {} dangerous: {} not asked (false negatives); {} refused",
        tally.harmless,
        tally.floor,
        tally.false_positives.len(),
        tally.dangerous,
        tally.false_negatives.len(),
        tally.refused,
    );
    for fp in &tally.false_positives {
        println!("  asked about harmless {fp}");
    }
    assert!(
        tally.false_negatives.is_empty(),
        "dangerous commands slipped through:\n{}",
        tally.false_negatives.join("\n")
    );
    assert!(tally.failures.is_empty(), "{}", tally.failures.join("\n"));
    assert!(
        tally.harmless >= 100,
        "{} harmless commands",
        tally.harmless
    );
}
