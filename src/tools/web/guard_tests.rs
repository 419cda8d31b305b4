//! Every row of the SSRF rule, with and without the operator's switch, plus URL spellings
//! that hide an address and the resolver's all-or-nothing judgement.

use std::collections::BTreeMap;

use super::*;

/// (address, refused by default, refused even when private URLs are allowed)
const TABLE: &[(&str, bool, bool)] = &[
    // public
    ("93.184.216.34", false, false),
    ("8.8.8.8", false, false),
    ("2606:4700:4700::1111", false, false),
    // private, loopback, link-local, reserved, multicast, unspecified, CGNAT
    ("10.1.2.3", true, false),
    ("172.16.0.1", true, false),
    ("172.31.255.255", true, false),
    ("192.168.1.1", true, false),
    ("127.0.0.1", true, false),
    ("127.255.255.254", true, false),
    ("0.0.0.0", true, false),
    ("100.64.0.1", true, false),
    ("100.127.255.254", true, false),
    ("192.0.2.10", true, false),
    ("198.18.0.1", true, false),
    ("198.51.100.7", true, false),
    ("203.0.113.9", true, false),
    ("224.0.0.1", true, false),
    ("239.255.255.250", true, false),
    ("240.0.0.1", true, false),
    ("255.255.255.255", true, false),
    ("::1", true, false),
    ("::", true, false),
    ("fc00::1", true, false),
    ("fd12:3456::1", true, false),
    ("fe80::1", true, false),
    ("fec0::1", true, false),
    ("ff02::1", true, false),
    ("2001:db8::1", true, false),
    ("2001::1", true, false),
    ("64:ff9b::7f00:1", true, false),
    // IPv4-mapped and 6to4 IPv6 are judged by the IPv4 address inside
    ("::ffff:127.0.0.1", true, false),
    ("::ffff:10.0.0.1", true, false),
    ("::ffff:93.184.216.34", false, false),
    ("2002:7f00:1::", true, false),
    // cloud metadata: never, switch or not
    ("169.254.169.254", true, true),
    ("169.254.170.2", true, true),
    ("169.254.169.253", true, true),
    ("169.254.1.1", true, true),
    ("100.100.100.200", true, true),
    ("fd00:ec2::254", true, true),
    ("::ffff:169.254.169.254", true, true),
    ("::ffff:100.100.100.200", true, true),
];

#[test]
fn every_address_row() {
    for (text, default_refused, always_refused) in TABLE {
        let ip: IpAddr = text.parse().unwrap();
        assert_eq!(
            check_ip(ip, false).is_err(),
            *default_refused,
            "{text} by default"
        );
        assert_eq!(
            check_ip(ip, true).is_err(),
            *always_refused,
            "{text} with the switch on"
        );
    }
}

#[test]
fn url_spellings_that_hide_loopback_are_refused() {
    for url in [
        "http://127.0.0.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://[::1]:8080/x",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.GOOG./",
        "file:///etc/passwd",
        "gopher://127.0.0.1:25/",
        "http://[fe80::1%25eth0]/",
        "not a url",
    ] {
        let result = parse_checked(url, false);
        assert!(result.is_err(), "{url} was allowed");
        assert!(result.unwrap_err().to_string().starts_with(BLOCKED));
    }
    assert!(parse_checked("https://example.com/a?b=c", false).is_ok());
    assert!(parse_checked("http://127.0.0.1:8080/", true).is_ok());
    assert!(parse_checked("http://169.254.169.254/", true).is_err());
    assert!(parse_checked("http://metadata.google.internal/", true).is_err());
}

/// A lookup from a fixed table; unknown names fail like NXDOMAIN.
struct Table(BTreeMap<&'static str, Vec<IpAddr>>);

impl Lookup for Table {
    fn lookup(&self, host: String) -> BoxFuture<'static, std::io::Result<Vec<IpAddr>>> {
        let found = self.0.get(host.as_str()).cloned();
        Box::pin(async move {
            found.ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))
        })
    }
}

fn resolver(allow_private: bool) -> GuardedResolver {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    GuardedResolver::new(
        Arc::new(Table(BTreeMap::from([
            ("public.test", vec![ip("93.184.216.34")]),
            ("inside.test", vec![ip("127.0.0.1")]),
            ("mixed.test", vec![ip("93.184.216.34"), ip("10.0.0.5")]),
            ("meta.test", vec![ip("169.254.169.254")]),
        ]))),
        allow_private,
    )
}

#[tokio::test]
async fn resolver_judges_every_address_and_fails_closed() {
    let guard = resolver(false);
    assert!(guard.resolve_checked("public.test").await.is_ok());
    for name in [
        "inside.test",
        "mixed.test",
        "meta.test",
        "nowhere.test",
        "metadata.goog",
    ] {
        let refused = guard.resolve_checked(name).await.unwrap_err();
        assert!(refused.to_string().contains(name), "{refused}");
    }
    let allowing = resolver(true);
    assert!(allowing.resolve_checked("inside.test").await.is_ok());
    assert!(allowing.resolve_checked("mixed.test").await.is_ok());
    assert!(allowing.resolve_checked("meta.test").await.is_err());
    assert!(allowing.resolve_checked("nowhere.test").await.is_err());
}
