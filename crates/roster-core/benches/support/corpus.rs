//! A deterministic synthetic skill corpus for the benches: pseudo-words drawn with a Zipf
//! distribution (so some terms are very common, as in real text), skills spread over 50
//! namespaces, one in ten visible only to `pro`.

#![allow(dead_code)]

use roster_core::skills::SkillSource;

/// splitmix64: small, deterministic, good enough to shape a corpus.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const SYLLABLES: [&str; 24] = [
    "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "po", "qua", "bri", "den", "fal", "gor",
    "hin", "jex", "mor", "nal", "pex", "ros", "tal", "ven", "wix",
];

const ENGLISH_HEAD: [&str; 24] = [
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "for", "with", "as", "on", "be", "by",
    "this", "from", "at", "or", "an", "use", "when", "you", "can",
];

/// Pseudo-words with Zipf-distributed sampling.
pub struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    /// `size` words; with `english_head`, the most frequent ranks are English function words,
    /// as in real text (the analyzer drops most of them as stop words).
    pub fn new(size: usize, rng: &mut Rng, english_head: bool) -> Self {
        let mut words = Vec::with_capacity(size);
        if english_head {
            words.extend(ENGLISH_HEAD.iter().map(|w| w.to_string()));
        }
        let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
        while words.len() < size {
            let n = 2 + rng.below(3);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect();
            if seen.insert(word.clone()) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (1..=size)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect::<Vec<_>>();
        let cumulative = cumulative.into_iter().map(|c| c / total).collect();
        Vocabulary { words, cumulative }
    }

    pub fn sample(&self, rng: &mut Rng) -> &str {
        let u = rng.unit();
        let at = self
            .cumulative
            .partition_point(|&c| c < u)
            .min(self.words.len() - 1);
        &self.words[at]
    }

    pub fn words(&self, rng: &mut Rng, n: usize) -> String {
        (0..n)
            .map(|_| self.sample(rng))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `n` skill sources: name of two words plus a number, 3 tags, a 15-word description and a
/// 120-word body.
pub fn skill_sources(n: usize) -> Vec<SkillSource> {
    let mut rng = Rng::new(42);
    let vocabulary = Vocabulary::new(20_000, &mut rng, true);
    let tags = Vocabulary::new(300, &mut rng, false);
    (0..n)
        .map(|i| {
            let name = format!(
                "{}-{}-{i}",
                vocabulary.sample(&mut rng),
                vocabulary.sample(&mut rng)
            );
            let namespace = format!("ns{}", i % 50);
            let tag_list = (0..3)
                .map(|_| tags.sample(&mut rng).to_owned())
                .collect::<Vec<_>>()
                .join(", ");
            let visibility = if i % 10 == 0 {
                "visibility: [pro]\n"
            } else {
                ""
            };
            let text = format!(
                "---\nname: {name}\ndescription: {}\ntags: [{tag_list}]\n{visibility}---\n{}\n",
                vocabulary.words(&mut rng, 15),
                vocabulary.words(&mut rng, 120),
            );
            SkillSource::new(format!("{namespace}/{name}"), text)
        })
        .collect()
}

/// Queries of one to three words drawn from the same distribution as the corpus text.
pub fn queries(n: usize) -> Vec<String> {
    let mut rng = Rng::new(42);
    let vocabulary = Vocabulary::new(20_000, &mut rng, true);
    let mut rng = Rng::new(7);
    (0..n)
        .map(|_| {
            let words = 1 + rng.below(3);
            vocabulary.words(&mut rng, words)
        })
        .collect()
}

/// Queries of one to three words of middling frequency (ranks 50–5,000), the words a person
/// types to find a topic.
pub fn topical_queries(n: usize) -> Vec<String> {
    let mut rng = Rng::new(42);
    let vocabulary = Vocabulary::new(20_000, &mut rng, true);
    let mut rng = Rng::new(11);
    (0..n)
        .map(|_| {
            let words = 1 + rng.below(3);
            (0..words)
                .map(|_| vocabulary.words[50 + rng.below(4950)].clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}
