//! Login attempts, rate-limited: a token bucket per client address and one for everyone, so a
//! guesser gets a few tries a minute from one address and not many more from a thousand. Every
//! attempt costs a token, the right token too: while a client is held back, a right and a wrong
//! token get the same answer (429), so the limit cannot be used to test tokens.
//!
//! Memory is bounded: at most [`MAX_ADDRESSES`] addresses are remembered (an IPv6 address by
//! its /64, which one host usually holds whole); past that, the one that has been quiet longest
//! is forgotten first, and the shared bucket still holds everyone back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

/// Attempts one client address may make at once, then one per [`ADDRESS_REFILL`].
const ADDRESS_BURST: f64 = 10.0;
const ADDRESS_REFILL: Duration = Duration::from_secs(6);
/// Attempts all clients together may make at once, then one per [`OVERALL_REFILL`].
const OVERALL_BURST: f64 = 30.0;
const OVERALL_REFILL: Duration = Duration::from_secs(1);
/// Client addresses remembered at once.
const MAX_ADDRESSES: usize = 4096;

/// A token bucket: `burst` tokens, one more every `refill`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Self {
            tokens: burst,
            at: now,
        }
    }

    /// The tokens there are at `now`.
    fn level(&self, now: Instant, burst: f64, refill: Duration) -> f64 {
        let gained = now.saturating_duration_since(self.at).as_secs_f64() / refill.as_secs_f64();
        (self.tokens + gained).min(burst)
    }

    /// How long from `now` until a token is there (zero: there is one).
    fn wait(&self, now: Instant, burst: f64, refill: Duration) -> Duration {
        let level = self.level(now, burst, refill);
        if level >= 1.0 {
            Duration::ZERO
        } else {
            refill.mul_f64(1.0 - level)
        }
    }

    fn take(&mut self, now: Instant, burst: f64, refill: Duration) {
        self.tokens = self.level(now, burst, refill) - 1.0;
        self.at = now;
    }
}

/// The dashboard's login attempts: who may try now, and who must wait how long.
pub(super) struct LoginAttempts {
    buckets: Mutex<Buckets>,
}

struct Buckets {
    overall: Bucket,
    by_address: HashMap<IpAddr, Bucket>,
}

impl Default for LoginAttempts {
    fn default() -> Self {
        Self {
            buckets: Mutex::new(Buckets {
                overall: Bucket::full(OVERALL_BURST, Instant::now()),
                by_address: HashMap::new(),
            }),
        }
    }
}

impl LoginAttempts {
    /// Counts an attempt from `client` (`None`: an address not known, all such share one) at
    /// `now`: `Err` with how long to wait when it must not be tried now.
    pub(super) fn attempt(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let key = client.map_or(IpAddr::from([0u8; 16]), address_key);
        let mut buckets = lock(&self.buckets);
        if !buckets.by_address.contains_key(&key) && buckets.by_address.len() >= MAX_ADDRESSES {
            forget_one(&mut buckets.by_address, now);
        }
        let Buckets {
            overall,
            by_address,
        } = &mut *buckets;
        let address = by_address
            .entry(key)
            .or_insert_with(|| Bucket::full(ADDRESS_BURST, now));
        let wait = address
            .wait(now, ADDRESS_BURST, ADDRESS_REFILL)
            .max(overall.wait(now, OVERALL_BURST, OVERALL_REFILL));
        if !wait.is_zero() {
            return Err(wait);
        }
        address.take(now, ADDRESS_BURST, ADDRESS_REFILL);
        overall.take(now, OVERALL_BURST, OVERALL_REFILL);
        Ok(())
    }
}

/// The key of a client address: an IPv4 address as it is (an IPv4-mapped IPv6 one too), an
/// IPv6 one by its /64.
fn address_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut octets = v6.octets();
                octets[8..].fill(0);
                IpAddr::from(octets)
            }
        },
    }
}

/// Forgets the address that has been quiet longest (a full bucket first: forgetting it loses
/// nothing).
fn forget_one(by_address: &mut HashMap<IpAddr, Bucket>, now: Instant) {
    let full = by_address
        .iter()
        .find(|(_, b)| b.level(now, ADDRESS_BURST, ADDRESS_REFILL) >= ADDRESS_BURST)
        .map(|(k, _)| *k);
    let victim = full.or_else(|| by_address.iter().min_by_key(|(_, b)| b.at).map(|(k, _)| *k));
    if let Some(key) = victim {
        by_address.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().expect("an address"))
    }

    #[test]
    fn one_address_gets_its_burst_then_waits_for_a_token() {
        let attempts = LoginAttempts::default();
        let now = Instant::now();
        for n in 0..10 {
            assert_eq!(attempts.attempt(ip("10.0.0.1"), now), Ok(()), "attempt {n}");
        }
        let wait = attempts
            .attempt(ip("10.0.0.1"), now)
            .expect_err("held back");
        assert_eq!(wait, ADDRESS_REFILL);
        // Another address is not held back by this one.
        assert_eq!(attempts.attempt(ip("10.0.0.2"), now), Ok(()));
        // A refused attempt costs nothing: one refill later there is one token.
        let later = now + ADDRESS_REFILL;
        assert_eq!(attempts.attempt(ip("10.0.0.1"), later), Ok(()));
        assert!(attempts.attempt(ip("10.0.0.1"), later).is_err());
    }

    #[test]
    fn all_addresses_together_are_held_back_too() {
        let attempts = LoginAttempts::default();
        let now = Instant::now();
        for n in 0..30u8 {
            let addr = IpAddr::from([10, 0, 1, n]);
            assert_eq!(attempts.attempt(Some(addr), now), Ok(()), "address {n}");
        }
        let wait = attempts
            .attempt(ip("10.0.2.1"), now)
            .expect_err("the shared bucket is empty");
        assert_eq!(wait, OVERALL_REFILL);
        assert_eq!(attempts.attempt(ip("10.0.2.1"), now + wait), Ok(()));
    }

    #[test]
    fn an_ipv6_host_counts_by_its_64_and_a_mapped_ipv4_as_itself() {
        assert_eq!(
            address_key("2001:db8:1:2:aaaa::1".parse().expect("v6")),
            "2001:db8:1:2::".parse::<IpAddr>().expect("v6")
        );
        assert_eq!(
            address_key("::ffff:10.0.0.1".parse().expect("mapped")),
            "10.0.0.1".parse::<IpAddr>().expect("v4")
        );
        let attempts = LoginAttempts::default();
        let now = Instant::now();
        for n in 0..10u16 {
            let addr = IpAddr::from([0x2001, 0xdb8, 0, 7, n, 0, 0, 1]);
            assert_eq!(attempts.attempt(Some(addr), now), Ok(()));
        }
        assert!(attempts.attempt(ip("2001:db8:0:7::99"), now).is_err());
    }

    #[test]
    fn the_addresses_remembered_are_bounded() {
        let attempts = LoginAttempts::default();
        let start = Instant::now();
        for n in 0..(MAX_ADDRESSES as u32 + 100) {
            // Spread in time so the shared bucket never runs out.
            let now = start + OVERALL_REFILL * n;
            assert_eq!(
                attempts.attempt(Some(IpAddr::from(n.to_be_bytes())), now),
                Ok(())
            );
        }
        assert_eq!(lock(&attempts.buckets).by_address.len(), MAX_ADDRESSES);
    }
}
