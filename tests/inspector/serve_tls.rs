//! `serve --tls-cert/--tls-key` against a simulated engine and client in their own
//! processes: `wss://`, control on an address that is not loopback, and the crate's
//! client and the window's viewer over TLS.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::time::{Duration, Instant};

use common::served::{Serve, camera_off, channels, messages};
use common::{DEADLINE, SimEngine, sim_client};
use lrbc_remote::view::Connection;

const ENGINE: &[&str] = &["--envs", "6", "--obs", "5", "--act", "2", "--image", "none"];

/// A self-signed certificate for 127.0.0.1 and its PKCS #8 key (the openssl command).
fn self_signed(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            // A server's certificate, not an authority's (webpki refuses those).
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs (package openssl)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert, key)
}

#[test]
fn tls_serves_wss_and_lets_control_off_loopback() {
    let engine = SimEngine::start("serve-tls", ENGINE);
    let mut client = sim_client(&engine.name, "200");
    let dir = common::temp_dir("serve-tls");
    let (cert, key) = self_signed(&dir);
    // A key that is not one: one line, exit 1.
    let (code, _, err) = common::run_inspector(&[
        "serve",
        "--shm",
        &engine.name,
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        cert.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--tls-key: no PEM PKCS #8 private key"),
        "{err}"
    );
    let serve = Serve::start_on(
        &engine.name,
        "0.0.0.0:0",
        &[
            "--allow-control",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(serve.url.starts_with("wss://0.0.0.0:"), "{}", serve.url);
    serve.log_line("anyone who can reach this address");
    let port = serve.url.rsplit(':').next().unwrap();
    let url = format!("wss://127.0.0.1:{port}");
    // Plain WebSocket to a TLS server: refused.
    assert!(
        Connection::connect(&format!("ws://127.0.0.1:{port}"), Duration::from_secs(5)).is_err()
    );
    // The certificate is nobody's the client trusts yet.
    let e = Connection::connect(&url, Duration::from_secs(5))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("TLS to 127.0.0.1:"), "{e}");
    lrbc_remote::view::client::trust_certificates(&std::fs::read(&cert).unwrap()).unwrap();
    let mut c = Connection::connect(&url, Duration::from_secs(10)).unwrap();
    let ids = channels(&mut c, &["/lrbc/frame"]);
    c.subscribe(&ids).unwrap();
    assert!(messages(&mut c, "/lrbc/frame", 10).len() >= 10);
    // Control over TLS on an address that is not loopback.
    camera_off(&mut c);
    c.close();
    // The window's viewer over TLS: the run described and its frames.
    let deadline = Instant::now() + DEADLINE;
    let viewer = lrbc_remote::view::Viewer::start(
        &url,
        lrbc_live::sampler::SamplerSettings::default(),
        lrbc_live::traffic::TrafficLimits::default(),
        std::sync::Arc::new(|| {}),
    )
    .unwrap();
    while viewer.data.lock().unwrap().stats.frames.sampled < 10 || viewer.geometry().0 == 0 {
        assert!(Instant::now() < deadline, "{}", viewer.link().summary());
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = client.kill();
    let _ = client.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
