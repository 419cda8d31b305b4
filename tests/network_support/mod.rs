//! What the proxy and private-CA tests need around the platform fakes: a private CA with a
//! certificate for 127.0.0.1 (rcgen), a TLS front that serves a plain fake over TLS with
//! that certificate, and a small HTTP CONNECT proxy (RFC 9110 §9.3.6) that records where it
//! tunnelled to.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A private CA and a server certificate it signed for `127.0.0.1` and `localhost`.
pub struct TestCa {
    pub ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "hermesd test private CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(leaf.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .unwrap();
        TestCa {
            ca_pem: ca_cert.pem(),
            server: Arc::new(server),
        }
    }

    /// Serves `backend` (a plain fake) over TLS on a new 127.0.0.1 port; returns the port's
    /// address. Runs until the runtime ends.
    pub async fn tls_front(&self, backend: SocketAddr) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(self.server.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends the handshake: nothing to do.
                    let Ok(mut tls) = acceptor.accept(client).await else {
                        return;
                    };
                    if let Ok(mut plain) = TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                    }
                });
            }
        });
        addr
    }
}

/// An HTTP CONNECT proxy on 127.0.0.1 that refuses every other method and records each
/// tunnel's target (`host:port`).
pub struct ConnectProxy {
    pub addr: SocketAddr,
    tunnels: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub async fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let record = tunnels.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(tunnel(client, record.clone()));
            }
        });
        ConnectProxy { addr, tunnels }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().unwrap().clone()
    }
}

async fn tunnel(mut client: TcpStream, record: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        match client.read(&mut byte).await {
            Ok(1) if head.len() < 16 * 1024 => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut words = text.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        let _ = client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    let target = target.to_owned();
    let Ok(mut upstream) = TcpStream::connect(&target).await else {
        let _ = client
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    record.lock().unwrap().push(target);
    if client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}
