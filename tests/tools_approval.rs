//! The approval gate end to end: once / session / always / deny, the timeout that fails
//! closed, cancellation, mode off, the permanent allowlist (exact, glob, legacy keys), deny
//! rules, the hardline floor and the `sudo -S` guard — and "always" editing config.yaml
//! without losing anything else in it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermesd::config::ApprovalMode;
use hermesd::tools::approval::{
    ApprovalDecision, ApprovalGate, ApprovalOutcome, ApprovalPrompt, ApprovalRequest,
    ApprovalSettings,
};
use tokio_util::sync::CancellationToken;

struct Recorder {
    calls: AtomicUsize,
    last: Mutex<Option<ApprovalRequest>>,
}

fn answering(decision: ApprovalDecision) -> (ApprovalPrompt, Arc<Recorder>) {
    let recorder = Arc::new(Recorder {
        calls: AtomicUsize::new(0),
        last: Mutex::new(None),
    });
    let seen = Arc::clone(&recorder);
    let prompt: ApprovalPrompt = Arc::new(move |request| {
        seen.calls.fetch_add(1, Ordering::SeqCst);
        *seen.last.lock().unwrap() = Some(request);
        Box::pin(async move { decision })
    });
    (prompt, recorder)
}

fn settings(dir: &std::path::Path) -> ApprovalSettings {
    ApprovalSettings::new(dir.join("config.yaml"))
}

const DANGEROUS: &str = "git reset --hard HEAD~3";
const DESCRIPTION: &str = "git reset --hard (destroys uncommitted changes)";

#[tokio::test]
async fn harmless_commands_never_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Deny);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    assert_eq!(
        gate.check("s1", "ls -la && cargo test").await,
        ApprovalOutcome::Allowed
    );
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn once_allows_one_command_and_asks_again_next_time() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Once);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    let outcome = gate.check("s1", DANGEROUS).await;
    assert_eq!(
        outcome,
        ApprovalOutcome::Approved {
            description: DESCRIPTION.into()
        }
    );
    assert!(outcome.is_allowed());
    let request = recorder.last.lock().unwrap().clone().unwrap();
    assert_eq!(request.session_id, "s1");
    assert_eq!(request.command, DANGEROUS);
    assert_eq!(request.pattern_key, DESCRIPTION);
    assert!(request.allow_permanent);
    gate.check("s1", DANGEROUS).await;
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn session_approval_covers_the_pattern_in_that_session_only() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Session);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    assert!(gate.check("s1", DANGEROUS).await.is_allowed());
    // Same pattern, different command: no prompt in s1.
    assert_eq!(
        gate.check("s1", "git reset --hard").await,
        ApprovalOutcome::Allowed
    );
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
    assert!(gate.check("s2", DANGEROUS).await.is_allowed());
    assert_eq!(
        recorder.calls.load(Ordering::SeqCst),
        2,
        "another session is asked again"
    );
    gate.clear_session("s1");
    gate.check("s1", DANGEROUS).await;
    assert_eq!(
        recorder.calls.load(Ordering::SeqCst),
        3,
        "cleared sessions are asked again"
    );
    assert!(
        !dir.path().join("config.yaml").exists(),
        "session answers are not persisted"
    );
}

#[tokio::test]
async fn deny_blocks_and_tells_the_model_not_to_retry() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, _) = answering(ApprovalDecision::Deny);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    let ApprovalOutcome::Denied(message) = gate.check("s1", DANGEROUS).await else {
        panic!("expected a denial");
    };
    assert!(
        message.starts_with("BLOCKED: the user refused this command."),
        "{message}"
    );
    assert!(message.contains("Do not run it again"), "{message}");
    assert!(!message.contains("No answer means no"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_prompt_times_out_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path());
    s.timeout = Duration::from_secs(60);
    let prompt: ApprovalPrompt = Arc::new(|_| Box::pin(std::future::pending()));
    let gate = ApprovalGate::new(s, Some(prompt));
    let started = tokio::time::Instant::now();
    let ApprovalOutcome::Blocked(message) = gate.check("s1", DANGEROUS).await else {
        panic!("expected a timeout block");
    };
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert!(
        message.starts_with("BLOCKED: no answer from the user in time"),
        "{message}"
    );
    assert!(message.contains("No answer means no."), "{message}");
    assert!(message.contains("Do not run it again"), "{message}");
}

#[tokio::test]
async fn cancelling_while_waiting_denies() {
    let dir = tempfile::tempdir().unwrap();
    let prompt: ApprovalPrompt = Arc::new(|_| Box::pin(std::future::pending()));
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = gate.check_cancellable("s1", DANGEROUS, &cancel).await;
    assert!(
        matches!(outcome, ApprovalOutcome::Denied(m) if m.starts_with("BLOCKED: the user refused"))
    );
}

#[tokio::test]
async fn without_a_way_to_ask_dangerous_commands_are_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let gate = ApprovalGate::new(settings(dir.path()), None);
    assert_eq!(
        gate.check("s1", DANGEROUS).await,
        ApprovalOutcome::Blocked(
            "BLOCKED: the approval request could not reach the user. Do not try again.".into()
        )
    );
    let panicking: ApprovalPrompt = Arc::new(|_| Box::pin(async { panic!("adapter crashed") }));
    let gate = ApprovalGate::new(settings(dir.path()), Some(panicking));
    assert!(matches!(
        gate.check("s1", DANGEROUS).await,
        ApprovalOutcome::Blocked(_)
    ));
}

#[tokio::test]
async fn mode_off_allows_everything_but_the_hardline_floor() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Deny);
    let mut s = settings(dir.path());
    s.mode = ApprovalMode::Off;
    let gate = ApprovalGate::new(s, Some(prompt));
    assert_eq!(gate.check("s1", DANGEROUS).await, ApprovalOutcome::Allowed);
    let ApprovalOutcome::Denied(message) = gate.check("s1", "sudo rm -rf /").await else {
        panic!("hardline must hold in mode off");
    };
    assert!(
        message.starts_with("BLOCKED (hardline): recursive delete of root filesystem."),
        "{message}"
    );
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn sudo_stdin_and_deny_rules_block_before_anything_else() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Once);
    let mut s = settings(dir.path());
    s.mode = ApprovalMode::Off;
    s.deny = vec!["*curl*".to_owned()];
    let gate = ApprovalGate::new(s.clone(), Some(Arc::clone(&prompt)));
    let ApprovalOutcome::Denied(sudo) = gate.check("s1", "echo pw | sudo -S apt install x").await
    else {
        panic!("sudo -S must be blocked");
    };
    assert!(
        sudo.starts_with("BLOCKED: sudo password guessing via stdin (sudo -S)."),
        "{sudo}"
    );
    let ApprovalOutcome::Denied(rule) = gate.check("s1", "CURL example.com").await else {
        panic!("deny rule must block");
    };
    assert!(
        rule.contains("forbade commands matching '*curl*'"),
        "{rule}"
    );
    // With SUDO_PASSWORD configured, `sudo -S` is only dangerous, so it is asked about.
    s.sudo_password_configured = true;
    s.mode = ApprovalMode::Manual;
    s.deny.clear();
    let gate = ApprovalGate::new(s, Some(prompt));
    assert!(gate.check("s1", "sudo -S apt install x").await.is_allowed());
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_permanent_allowlist_matches_keys_commands_globs_and_legacy_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Deny);
    let mut s = settings(dir.path());
    s.command_allowlist = vec![
        DESCRIPTION.to_owned(),
        "git push --force origin main".to_owned(),
        "docker stop *".to_owned(),
        r"rm\s+-[^\s]*r".to_owned(),
    ];
    let gate = ApprovalGate::new(s, Some(prompt));
    for command in [
        DANGEROUS,
        "git push --force origin main",
        "docker stop web",
        "rm -r build",
    ] {
        assert_eq!(
            gate.check("s1", command).await,
            ApprovalOutcome::Allowed,
            "{command}"
        );
    }
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 0);
    // Compound commands never use the command-text shortcut.
    assert!(
        !gate
            .check("s1", "docker stop web; docker kill db")
            .await
            .is_allowed()
    );
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
}

const CONFIG: &str = "# Hermes configuration\nmodel:\n  default: gpt-5  # the main model\n\napprovals:\n  mode: manual\n  timeout: 30\n\ncommand_allowlist:\n  - existing pattern   # keep me\n\ntelegram:\n  reply_to_mode: all\n";

#[cfg(unix)]
#[tokio::test]
async fn always_persists_to_config_yaml_and_keeps_everything_else() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (prompt, _) = answering(ApprovalDecision::Always);
    let mut s = settings(dir.path());
    s.command_allowlist = vec!["existing pattern".to_owned()];
    let gate = ApprovalGate::new(s, Some(prompt));
    assert!(gate.check("s1", DANGEROUS).await.is_allowed());

    let text = std::fs::read_to_string(&path).unwrap();
    let expected = CONFIG.replace(
        "  - existing pattern   # keep me\n",
        "  - existing pattern   # keep me\n  - \"git reset --hard (destroys uncommitted changes)\"\n",
    );
    assert_eq!(text, expected, "only one line was added");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    let parsed: serde_json::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(
        parsed["command_allowlist"],
        serde_json::json!(["existing pattern", DESCRIPTION])
    );

    // The same answer again does not duplicate the entry; a new gate reading the list
    // (a restart) allows the pattern in a fresh session without asking.
    let (prompt, recorder) = answering(ApprovalDecision::Always);
    let mut s = settings(dir.path());
    s.command_allowlist = vec!["existing pattern".to_owned()];
    let again = ApprovalGate::new(s, Some(prompt));
    again.check("s9", DANGEROUS).await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    let mut s = settings(dir.path());
    s.command_allowlist =
        serde_norway::from_str::<serde_json::Value>(&expected).unwrap()["command_allowlist"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
    let restarted = ApprovalGate::new(s, Some(answering(ApprovalDecision::Deny).0));
    assert_eq!(
        restarted.check("s10", DANGEROUS).await,
        ApprovalOutcome::Allowed
    );
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
}

#[cfg(unix)]
#[tokio::test]
async fn always_creates_a_missing_config_privately() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (prompt, _) = answering(ApprovalDecision::Always);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    assert!(gate.check("s1", DANGEROUS).await.is_allowed());
    let path = dir.path().join("config.yaml");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "command_allowlist:\n- \"git reset --hard (destroys uncommitted changes)\"\n"
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(gate.permanent_allowlist().contains(&DESCRIPTION.to_owned()));
}

#[tokio::test]
async fn an_unparsable_config_is_left_alone_but_the_approval_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, "approvals: [unclosed\n").unwrap();
    let (prompt, recorder) = answering(ApprovalDecision::Always);
    let gate = ApprovalGate::new(settings(dir.path()), Some(prompt));
    assert!(gate.check("s1", DANGEROUS).await.is_allowed());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "approvals: [unclosed\n"
    );
    assert_eq!(gate.check("s2", DANGEROUS).await, ApprovalOutcome::Allowed);
    assert_eq!(recorder.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn settings_come_from_the_validated_config() {
    let mut config = hermesd::config::Config::default();
    config.approvals.timeout_secs = 15;
    config.approvals.mode = ApprovalMode::Off;
    config.command_allowlist = vec!["recursive delete".into()];
    let home = hermesd::home::HermesHome::at("/srv/hermes");
    let env = [("HOME", "/home/ada"), ("SUDO_PASSWORD", "pw")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let s = ApprovalSettings::from_config(&config, &home, &env);
    assert_eq!(s.mode, ApprovalMode::Off);
    assert_eq!(s.timeout, Duration::from_secs(15));
    assert_eq!(s.command_allowlist, ["recursive delete"]);
    assert_eq!(
        s.config_path,
        std::path::Path::new("/srv/hermes/config.yaml")
    );
    assert_eq!(s.detection.user_homes[0], "/home/ada");
    assert!(s.sudo_password_configured);
}
