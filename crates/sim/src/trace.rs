//! Request traces: a sequence of object requests, each a key (the URL the schedulers
//! hash) with a size in bytes.
//!
//! Three sources, chosen by [`Trace::load`]:
//! - a SURGE workload directory (`surge-files.tsv`, `surge-documents.tsv`,
//!   `surge-requests.txt`), or its `surge-requests.txt`: each page request becomes its
//!   base object then its embedded objects, as `/f/<file_id>` with the file's size;
//! - a plain file, one `URL [size]` a line (`#` comments and blank lines skipped);
//! - `zipf:N_OBJECTS:N_REQUESTS[:ALPHA]`, a generated trace (fixed seed, deterministic).
//!
//! Keys are interned: a request is a `u32` id, and the trace keeps one key and one size
//! per id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Size given to an object of a plain trace when none of its lines has a size.
pub const DEFAULT_SIZE: u64 = 4096;

/// Zipf exponent of `zipf:` traces when none is given (web popularity is typically
/// 0.6–0.9, Breslau et al., INFOCOM '99).
pub const DEFAULT_ALPHA: f64 = 0.8;

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line does not have the expected shape.
    #[error("{}:{line}: {msg}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A `zipf:` spec is malformed.
    #[error("bad zipf spec `{0}`: expected zipf:N_OBJECTS:N_REQUESTS[:ALPHA] with N ≥ 1 and ALPHA ≥ 0")]
    Zipf(String),
    /// The trace holds no request.
    #[error("{0}: no requests")]
    Empty(String),
}

/// A request sequence over interned keys.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Where it came from (a path or the zipf spec).
    pub name: String,
    keys: Vec<Box<[u8]>>,
    sizes: Vec<u64>,
    requests: Vec<u32>,
}

impl Trace {
    /// Reads `spec`: `zipf:…`, a SURGE directory or its `surge-requests.txt`, or a plain
    /// `URL [size]` file.
    pub fn load(spec: &str) -> Result<Trace, TraceError> {
        let trace = if let Some(rest) = spec.strip_prefix("zipf:") {
            let (objects, requests, alpha) = parse_zipf(rest).ok_or_else(|| TraceError::Zipf(spec.into()))?;
            Trace::zipf(objects, requests, alpha)
        } else {
            let path = Path::new(spec);
            if path.is_dir() {
                Trace::surge(path)?
            } else if path.file_name().is_some_and(|f| f == "surge-requests.txt") {
                Trace::surge(path.parent().unwrap_or(Path::new(".")))?
            } else {
                Trace::plain(path)?
            }
        };
        if trace.requests.is_empty() {
            return Err(TraceError::Empty(spec.into()));
        }
        Ok(trace)
    }

    /// The SURGE workload in `dir`.
    pub fn surge(dir: &Path) -> Result<Trace, TraceError> {
        let files = read(&dir.join("surge-files.tsv"))?;
        let docs = read(&dir.join("surge-documents.tsv"))?;
        let reqs = read(&dir.join("surge-requests.txt"))?;
        Trace::surge_from(&dir.display().to_string(), &files, &docs, &reqs)
            .map_err(|(file, line, msg)| TraceError::Parse { path: dir.join(file), line, msg })
    }

    /// Builds a SURGE trace from the three files' texts. Errors name the file (by its
    /// SURGE name) and the line.
    fn surge_from(
        name: &str,
        files: &str,
        docs: &str,
        reqs: &str,
    ) -> Result<Trace, (&'static str, usize, String)> {
        let mut sizes: HashMap<&str, u64> = HashMap::new();
        for (n, line) in data_lines(files) {
            let mut f = line.split_whitespace();
            let (Some(id), Some(size), None) = (f.next(), f.next(), f.next()) else {
                return Err(("surge-files.tsv", n, "expected `file_id size`".into()));
            };
            let size = size.parse().map_err(|_| ("surge-files.tsv", n, format!("bad size `{size}`")))?;
            sizes.insert(id, size);
        }
        let mut b = Builder::new(name);
        let mut pages: HashMap<&str, Vec<u32>> = HashMap::new();
        for (n, line) in data_lines(docs) {
            let (doc, list) =
                line.split_once('\t').ok_or(("surge-documents.tsv", n, "expected a tab".into()))?;
            let mut ids = Vec::new();
            for file in list.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
                let size = *sizes.get(file).ok_or_else(|| {
                    ("surge-documents.tsv", n, format!("file {file} not in surge-files.tsv"))
                })?;
                ids.push(b.intern(format!("/f/{file}").as_bytes(), Some(size)));
            }
            pages.insert(doc.trim(), ids);
        }
        for (n, line) in reqs.lines().enumerate() {
            let doc = line.trim();
            if doc.is_empty() {
                continue;
            }
            let ids = pages.get(doc).ok_or_else(|| {
                ("surge-requests.txt", n + 1, format!("document {doc} not in surge-documents.tsv"))
            })?;
            b.requests.extend_from_slice(ids);
        }
        Ok(b.finish())
    }

    /// A plain trace file: one `URL [size]` a line.
    pub fn plain(path: &Path) -> Result<Trace, TraceError> {
        let text = read(path)?;
        Trace::parse_plain(&path.display().to_string(), &text).map_err(|(line, msg)| TraceError::Parse {
            path: path.to_path_buf(),
            line,
            msg,
        })
    }

    /// Parses the text of a plain trace. An object's size is the first size any of its
    /// lines gives, else [`DEFAULT_SIZE`]. Errors are `(line, message)`.
    pub fn parse_plain(name: &str, text: &str) -> Result<Trace, (usize, String)> {
        let mut b = Builder::new(name);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut f = line.split_whitespace();
            let (url, size) = match (f.next(), f.next(), f.next()) {
                (Some(url), size, None) => (url, size),
                _ => return Err((n + 1, "expected `URL [size]`".into())),
            };
            let size =
                size.map(|s| s.parse::<u64>().map_err(|_| (n + 1, format!("bad size `{s}`")))).transpose()?;
            let id = b.intern(url.as_bytes(), size);
            b.requests.push(id);
        }
        Ok(b.finish())
    }

    /// `requests` requests over `objects` objects with Zipf(`alpha`) popularity (object
    /// `/z/<i>` has rank i + 1) and sizes from a bounded Pareto distribution (shape 1.1,
    /// 1,000 B to 10 MB: median ≈ 1.9 KB, mean ≈ 6.6 KB), independent of popularity.
    /// The seed is fixed: the same arguments give the same trace.
    pub fn zipf(objects: u32, requests: u32, alpha: f64) -> Trace {
        let mut rng = SplitMix64(0x5eed_c5c1_7c40_0002);
        let mut b = Builder::new(&format!("zipf:{objects}:{requests}:{alpha}"));
        for i in 0..objects {
            let size = bounded_pareto(rng.unit(), 1.1, 1_000.0, 10_000_000.0);
            b.intern(format!("/z/{i}").as_bytes(), Some(size));
        }
        let mut cdf = Vec::with_capacity(objects as usize);
        let mut sum = 0.0;
        for rank in 1..=objects {
            sum += f64::from(rank).powf(-alpha);
            cdf.push(sum);
        }
        for _ in 0..requests {
            let u = rng.unit() * sum;
            let i = cdf.partition_point(|&c| c <= u).min(objects as usize - 1);
            b.requests.push(i as u32);
        }
        b.finish()
    }

    /// The request sequence, as key ids.
    pub fn requests(&self) -> &[u32] {
        &self.requests
    }

    /// The key (URL) of id `id`.
    pub fn key(&self, id: u32) -> &[u8] {
        &self.keys[id as usize]
    }

    /// The size in bytes of object `id`.
    pub fn size(&self, id: u32) -> u64 {
        self.sizes[id as usize]
    }

    /// Number of distinct keys.
    pub fn distinct(&self) -> usize {
        self.keys.len()
    }

    /// Every distinct key, by id.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().map(|k| &**k)
    }

    /// Bytes of all distinct objects (what caching everything would take).
    pub fn distinct_bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    /// Share (0–1) of the requests that go to the most requested object: no placement
    /// that keeps each object on one server can get load imbalance below this × N.
    pub fn top_share(&self) -> f64 {
        let mut counts = vec![0u64; self.keys.len()];
        for &id in &self.requests {
            counts[id as usize] += 1;
        }
        let top = counts.iter().copied().max().unwrap_or(0);
        if self.requests.is_empty() {
            0.0
        } else {
            top as f64 / self.requests.len() as f64
        }
    }

    /// Bytes of all requests.
    pub fn requested_bytes(&self) -> u64 {
        self.requests.iter().map(|&id| self.size(id)).sum()
    }
}

/// Interns keys in order of first appearance.
struct Builder {
    name: String,
    index: HashMap<Box<[u8]>, u32>,
    keys: Vec<Box<[u8]>>,
    sizes: Vec<Option<u64>>,
    requests: Vec<u32>,
}

impl Builder {
    fn new(name: &str) -> Self {
        Builder {
            name: name.into(),
            index: HashMap::new(),
            keys: Vec::new(),
            sizes: Vec::new(),
            requests: Vec::new(),
        }
    }

    fn intern(&mut self, key: &[u8], size: Option<u64>) -> u32 {
        let id = match self.index.get(key) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
                self.index.insert(key.into(), id);
                self.keys.push(key.into());
                self.sizes.push(None);
                id
            }
        };
        let slot = &mut self.sizes[id as usize];
        if slot.is_none() {
            *slot = size;
        }
        id
    }

    fn finish(self) -> Trace {
        Trace {
            name: self.name,
            keys: self.keys,
            sizes: self.sizes.into_iter().map(|s| s.unwrap_or(DEFAULT_SIZE)).collect(),
            requests: self.requests,
        }
    }
}

fn read(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|source| TraceError::Io { path: path.into(), source })
}

/// Non-blank lines after the header line, numbered from 1.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().skip(1).map(|(i, l)| (i + 1, l)).filter(|(_, l)| !l.trim().is_empty())
}

fn parse_zipf(rest: &str) -> Option<(u32, u32, f64)> {
    let mut f = rest.split(':');
    let objects: u32 = f.next()?.parse().ok()?;
    let requests: u32 = f.next()?.parse().ok()?;
    let alpha = match f.next() {
        Some(a) => a.parse().ok()?,
        None => DEFAULT_ALPHA,
    };
    let ok = objects >= 1 && requests >= 1 && alpha >= 0.0 && f64::is_finite(alpha) && f.next().is_none();
    ok.then_some((objects, requests, alpha))
}

/// Inverse CDF of the Pareto distribution with shape `a` truncated to [`lo`, `hi`].
fn bounded_pareto(u: f64, a: f64, lo: f64, hi: f64) -> u64 {
    let tail = 1.0 - (lo / hi).powf(a);
    (lo / (1.0 - u * tail).powf(1.0 / a)).round() as u64
}

/// SplitMix64 (Steele et al.): a few lines, fixed output for a fixed seed on every
/// platform and Rust release, which is all a reproducible generated trace needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_with_and_without_sizes() {
        let t = Trace::parse_plain("t", "# comment\n/a 100\n\n/b\n/a 999\n  /c 7  \n/b 50\n").unwrap();
        let reqs: Vec<&[u8]> = t.requests().iter().map(|&id| t.key(id)).collect();
        assert_eq!(reqs, [&b"/a"[..], b"/b", b"/a", b"/c", b"/b"]);
        assert_eq!(t.distinct(), 3);
        assert_eq!(t.size(0), 100, "the first size given wins");
        assert_eq!(t.size(1), 50, "a size given on a later line counts");
        assert_eq!(t.size(2), 7);
        assert_eq!(t.requested_bytes(), 100 + 50 + 100 + 7 + 50);
        assert_eq!(t.top_share(), 0.4);
    }

    #[test]
    fn plain_without_any_size_uses_the_default() {
        let t = Trace::parse_plain("t", "/x\n").unwrap();
        assert_eq!(t.size(0), DEFAULT_SIZE);
    }

    #[test]
    fn plain_errors_name_the_line() {
        assert_eq!(Trace::parse_plain("t", "/a\n/b big\n").unwrap_err().0, 2);
        assert_eq!(Trace::parse_plain("t", "/a 1 2\n").unwrap_err().0, 1);
    }

    #[test]
    fn surge_expands_pages_into_objects() {
        let files = "file_id\tsize_bytes\n0\t75\n1\t80\n2\t1000\n";
        let docs = "doc_id\tfile_ids\n0\t0\n1\t1 2\n2\t2,0\n";
        let reqs = "1\n0\n2\n1\n";
        let t = Trace::surge_from("s", files, docs, reqs).unwrap();
        let urls: Vec<String> =
            t.requests().iter().map(|&id| String::from_utf8_lossy(t.key(id)).into_owned()).collect();
        assert_eq!(urls, ["/f/1", "/f/2", "/f/0", "/f/2", "/f/0", "/f/1", "/f/2"]);
        assert_eq!(t.distinct(), 3);
        assert_eq!(t.distinct_bytes(), 75 + 80 + 1000);
        let err = Trace::surge_from("s", files, docs, "1\n7\n").unwrap_err();
        assert_eq!((err.0, err.1), ("surge-requests.txt", 2));
    }

    #[test]
    fn surge_workload_if_present() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/workload");
        if !dir.join("surge-requests.txt").exists() {
            return;
        }
        let t = Trace::load(&dir.display().to_string()).unwrap();
        assert_eq!(t.distinct(), 5000);
        assert_eq!(t.requests().len(), 535_108);
        let via_file = Trace::load(&dir.join("surge-requests.txt").display().to_string()).unwrap();
        assert_eq!(via_file.requests(), t.requests());
    }

    #[test]
    fn zipf_is_deterministic_and_skewed() {
        let a = Trace::load("zipf:1000:20000").unwrap();
        let b = Trace::zipf(1000, 20000, DEFAULT_ALPHA);
        assert_eq!(a.requests(), b.requests());
        assert_eq!(
            (0..1000).map(|i| a.size(i)).collect::<Vec<_>>(),
            (0..1000).map(|i| b.size(i)).collect::<Vec<_>>()
        );
        let mut counts = vec![0u32; 1000];
        for &id in a.requests() {
            counts[id as usize] += 1;
        }
        // rank 1 against rank 100: (100/1)^0.8 ≈ 40×
        assert!(counts[0] > 20 * counts[99].max(1), "{} vs {}", counts[0], counts[99]);
        assert!(counts[0] > counts[1] && counts[1] > counts[9]);
        let sizes: Vec<u64> = (0..1000).map(|i| a.size(i)).collect();
        assert!(sizes.iter().all(|&s| (1_000..=10_000_000).contains(&s)));
        assert!(*sizes.iter().max().unwrap() > 50 * 1_000, "heavy tail");
        assert_ne!(Trace::zipf(1000, 20000, 1.0).requests(), a.requests());
    }

    #[test]
    fn zipf_spec_errors() {
        for bad in ["zipf:", "zipf:10", "zipf:0:10", "zipf:10:10:x", "zipf:10:10:-1", "zipf:1:1:1:1"] {
            assert!(matches!(Trace::load(bad), Err(TraceError::Zipf(_))), "{bad}");
        }
        assert_eq!(Trace::load("zipf:1:5:0").unwrap().requests(), [0, 0, 0, 0, 0]);
    }
}
