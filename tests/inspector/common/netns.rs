//! A slow link for the tests (`lrbc_testkit::netns`), or the test skipped where the
//! machine cannot make one.

pub use lrbc_testkit::netns::Netns;

/// A namespace whose loopback carries `rate_mbit` Mbit/s; None, saying why, where the
/// machine cannot make one (not Linux, not root, no `ip` or `tc`): the test then
/// returns early and passes. A machine that can but fails fails the test.
pub fn slow_link(rate_mbit: f64) -> Option<Netns> {
    if let Some(why) = lrbc_testkit::netns::unavailable() {
        eprintln!("skipped: no slow link: {why}");
        return None;
    }
    let kbit = (rate_mbit * 1000.0).round() as u64;
    Some(Netns::create(kbit).unwrap_or_else(|e| panic!("a {rate_mbit} Mbit/s link: {e}")))
}
