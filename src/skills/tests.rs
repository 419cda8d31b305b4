use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn discovery_walks_categories_skips_support_dirs_and_other_systems() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("skills");
    write(
        &root,
        "devops/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Ship it\n---\nbody",
    );
    write(
        &root,
        "devops/deploy/references/old/SKILL.md",
        "---\nname: archived\n---\n",
    );
    write(&root, "notes/SKILL.md", "no frontmatter");
    write(
        &root,
        "mac-only/SKILL.md",
        "---\nname: mac-only\nplatforms: [macos]\n---\n",
    );
    write(
        &root,
        "node_modules/x/SKILL.md",
        "---\nname: vendored\n---\n",
    );
    let skills = discover(std::slice::from_ref(&root));
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    if cfg!(target_os = "macos") {
        assert_eq!(names, ["deploy", "mac-only", "notes"]);
    } else {
        assert_eq!(names, ["deploy", "notes"]);
    }
    assert_eq!(skills[0].category, "devops");
    assert_eq!(skills[0].description, "Ship it");
    assert_eq!(find(&skills, "devops/deploy").unwrap().name, "deploy");
}

#[test]
fn the_home_wins_a_name_clash_and_disabling_is_per_platform() {
    let dir = tempfile::tempdir().unwrap();
    let home_dir = dir.path().join("home");
    let external = dir.path().join("team");
    write(
        &home_dir.join("skills"),
        "a/SKILL.md",
        "---\nname: a\ndescription: mine\n---\n",
    );
    write(
        &external,
        "a/SKILL.md",
        "---\nname: a\ndescription: theirs\n---\n",
    );
    write(&external, "b/SKILL.md", "---\nname: b\n---\n");
    let home = HermesHome::at(&home_dir);
    let config = SkillsConfig {
        disabled: Vec::new(),
        platform_disabled: [("telegram".to_owned(), vec!["b".to_owned()])].into(),
        external_dirs: vec![external.display().to_string()],
        ..SkillsConfig::default()
    };
    let env = Default::default();
    let all = enabled(&home, &config, &env, Some("discord"));
    assert_eq!(all.len(), 2);
    assert_eq!(all[0].description, "mine");
    let telegram = enabled(&home, &config, &env, Some("telegram"));
    assert_eq!(telegram.len(), 1);
}

#[test]
fn long_descriptions_are_cut_for_the_index() {
    let skill = Skill {
        name: "x".into(),
        dir: PathBuf::from("/s/x"),
        category: "x".into(),
        description: "word ".repeat(30),
        frontmatter: Map::new(),
    };
    let short = skill.short_description();
    assert_eq!(short.chars().count(), 60);
    assert!(short.ends_with("..."));
}

#[test]
fn conditional_skills_follow_the_tools_on_offer() {
    let skill = |meta: &str| {
        let (frontmatter, _) = frontmatter::split(&format!(
            "---\nname: x\nmetadata:\n  hermes:\n    {meta}\n---\nbody"
        ));
        Skill {
            name: "x".into(),
            dir: PathBuf::from("/s/x"),
            category: "x".into(),
            description: String::new(),
            frontmatter,
        }
    };
    let tools = vec!["terminal".to_owned()];
    let toolsets = vec!["terminal".to_owned()];
    assert!(fits_tools(
        &skill("requires_tools: [terminal]"),
        &tools,
        &toolsets
    ));
    assert!(!fits_tools(
        &skill("requires_tools: [browser_navigate]"),
        &tools,
        &toolsets
    ));
    assert!(!fits_tools(
        &skill("fallback_for_toolsets: [terminal]"),
        &tools,
        &toolsets
    ));
    assert!(fits_tools(
        &skill("fallback_for_toolsets: [web]"),
        &tools,
        &toolsets
    ));
    assert!(!fits_tools(
        &skill("requires_toolsets: [web]"),
        &tools,
        &toolsets
    ));
}
