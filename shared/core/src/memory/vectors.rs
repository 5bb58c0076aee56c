//! Search by meaning over a user's vectors: one matrix of unit rows scored in one pass,
//! in 8 bits first and the best of them exactly ([`VectorIndex`]), kept between searches
//! while the user's memories are unchanged ([`VectorCache`]), so a search reads the
//! store's version of the user's index, not every vector (100,000 memories of 384
//! dimensions are 150 MB).

use super::MIN_SIMILARITY;
#[cfg(test)]
use super::backend::Postings;
use super::backend::{IndexVersion, MemoryScope};
use crate::sync;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One dimension's rows: vectors of another length are another model's, and never
/// compared with a query of this one.
#[derive(Debug, Default)]
struct Rows {
    ids: Vec<String>,
    /// `ids.len()` unit vectors, one after the other: the exact scores.
    values: Vec<f32>,
    /// The same vectors in 8 bits a component (each row scaled by its largest component),
    /// for the first pass: a quarter of the bytes to read, and reading is what a scan of
    /// 100,000 vectors waits on.
    codes: Vec<i8>,
    /// Per row, what a code of 1 is worth.
    scales: Vec<f32>,
}

/// A user's vectors, normalized once so that a cosine is a dot product.
#[derive(Debug, Default)]
pub struct VectorIndex {
    by_dimensions: HashMap<usize, Rows>,
}

fn norm(vector: &[f32]) -> f32 {
    vector.iter().map(|x| x * x).sum::<f32>().sqrt()
}

/// A vector in 8 bits a component, and what a code of 1 is worth.
fn quantize(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if largest == 0.0 {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    (vector.iter().map(|x| (x / scale).round() as i8).collect(), scale)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight partial sums the compiler keeps in vector registers (a single running sum
    // would be one serial chain of additions).
    let mut sums = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// The dot product of two 8-bit vectors (at most 2^14 components summed exactly in i32).
fn dot_codes(a: &[i8], b: &[i8]) -> i32 {
    let mut sums = [0i32; 16];
    let (a_chunks, b_chunks) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..16 {
            sums[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    sums.iter().sum::<i32>() + tail
}

/// How many of the first pass's best are scored exactly, for `limit` results: 8-bit
/// scores are within a few thousandths of the exact ones, so the exact best `limit` are
/// among the approximate best few times `limit`.
fn candidates(limit: usize) -> usize {
    limit * 4 + 32
}

/// How far below [`MIN_SIMILARITY`] an 8-bit score may be and its vector still be
/// scored exactly: more than 8-bit rounding moves a score.
const APPROXIMATION_MARGIN: f32 = 0.05;

/// From how many rows a scan is split over two threads: below it, starting a thread
/// costs more than half the scan saves.
const PARALLEL_SCAN_ROWS: usize = 20_000;

impl Rows {
    /// The 8-bit similarity of every row to the unit vector `query` that may reach
    /// [`MIN_SIMILARITY`] exactly, with its row.
    fn approximate(&self, query: &[f32]) -> Vec<(f32, usize)> {
        let (query_codes, query_scale) = quantize(query);
        let dimensions = query.len();
        let scan = |first_row: usize, codes: &[i8], scales: &[f32]| -> Vec<(f32, usize)> {
            let floor = MIN_SIMILARITY - APPROXIMATION_MARGIN;
            codes
                .chunks_exact(dimensions)
                .zip(scales)
                .map(|(codes, scale)| dot_codes(&query_codes, codes) as f32 * query_scale * scale)
                .enumerate()
                .filter(|(_, similarity)| *similarity >= floor)
                .map(|(row, similarity)| (similarity, first_row + row))
                .collect()
        };
        let parallel = std::thread::available_parallelism().map_or(1, usize::from) > 1;
        if !parallel || self.scales.len() < PARALLEL_SCAN_ROWS {
            return scan(0, &self.codes, &self.scales);
        }
        // A user's 100,000 vectors are milliseconds of scanning: half on another core
        // halves what the search waits for.
        let half = self.scales.len() / 2;
        let (first_codes, second_codes) = self.codes.split_at(half * dimensions);
        let (first_scales, second_scales) = self.scales.split_at(half);
        std::thread::scope(|threads| {
            let second = threads.spawn(|| scan(half, second_codes, second_scales));
            let mut all = scan(0, first_codes, first_scales);
            match second.join() {
                Ok(second) => all.extend(second),
                Err(panic) => std::panic::resume_unwind(panic),
            }
            all
        })
    }
}

impl VectorIndex {
    /// The vectors, zero vectors left out (they are similar to nothing).
    pub fn new(vectors: Vec<(String, Vec<f32>)>) -> VectorIndex {
        let mut by_dimensions: HashMap<usize, Rows> = HashMap::new();
        for (id, vector) in vectors {
            let length = norm(&vector);
            if length == 0.0 || !length.is_finite() {
                continue;
            }
            let unit: Vec<f32> = vector.iter().map(|x| x / length).collect();
            let (codes, scale) = quantize(&unit);
            let rows = by_dimensions.entry(vector.len()).or_default();
            rows.ids.push(id);
            rows.values.extend(unit);
            rows.codes.extend(codes);
            rows.scales.push(scale);
        }
        VectorIndex { by_dimensions }
    }

    /// What the index holds in memory, roughly.
    pub fn bytes(&self) -> usize {
        self.by_dimensions
            .values()
            .map(|rows| {
                rows.values.len() * 4
                    + rows.codes.len()
                    + rows.scales.len() * 4
                    + rows.ids.iter().map(|id| id.len() + 24).sum::<usize>()
            })
            .sum()
    }

    /// The ids of the `limit` vectors most similar to `query` (at least [`MIN_SIMILARITY`]),
    /// best first; equal similarities by id. Every vector is scored in 8 bits, the best
    /// of those again exactly.
    pub fn rank(&self, query: &[f32], limit: usize) -> Vec<(String, f64)> {
        let length = norm(query);
        let Some(rows) = self.by_dimensions.get(&query.len()).filter(|_| length > 0.0) else {
            return Vec::new();
        };
        let query: Vec<f32> = query.iter().map(|x| x / length).collect();
        let mut approximate = rows.approximate(&query);
        let keep = candidates(limit);
        if approximate.len() > keep {
            approximate.select_nth_unstable_by(keep - 1, |a, b| b.0.total_cmp(&a.0));
            approximate.truncate(keep);
        }
        let dimensions = query.len();
        let mut similar: Vec<(f32, usize)> = approximate
            .into_iter()
            .map(|(_, row)| (dot(&query, &rows.values[row * dimensions..(row + 1) * dimensions]), row))
            .filter(|(similarity, _)| *similarity >= MIN_SIMILARITY)
            .collect();
        similar.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| rows.ids[a.1].cmp(&rows.ids[b.1])));
        similar.truncate(limit);
        similar
            .into_iter()
            .map(|(similarity, row)| (rows.ids[row].clone(), f64::from(similarity)))
            .collect()
    }
}

/// Users' vector indexes as the store last had them, each with the store's
/// [`IndexVersion`] at the time it was read, within a memory budget (least recently
/// searched users go first). A replica's copy is used only while the store still
/// reports its version, so what another replica stores is searched at once.
#[derive(Debug)]
pub struct VectorCache {
    budget_bytes: usize,
    inner: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    users: HashMap<MemoryScope, Cached>,
    bytes: usize,
    /// Stamps each use, so the least recently used user is found.
    uses: u64,
}

#[derive(Debug)]
struct Cached {
    version: IndexVersion,
    index: Arc<VectorIndex>,
    last_used: u64,
}

/// What the cache may hold by default: a 100,000-memory user of a 384-dimension model
/// (about 160 MB) and some smaller ones.
pub const DEFAULT_VECTOR_CACHE_BYTES: usize = 512 << 20;

impl Default for VectorCache {
    fn default() -> Self {
        VectorCache::new(DEFAULT_VECTOR_CACHE_BYTES)
    }
}

impl VectorCache {
    pub fn new(budget_bytes: usize) -> VectorCache {
        VectorCache {
            budget_bytes,
            inner: Mutex::new(CacheState::default()),
        }
    }

    /// The user's index, if the cache holds it at `version`.
    pub fn get(&self, scope: &MemoryScope, version: IndexVersion) -> Option<Arc<VectorIndex>> {
        let mut state = sync::lock(&self.inner);
        state.uses += 1;
        let now = state.uses;
        let cached = state.users.get_mut(scope).filter(|c| c.version == version)?;
        cached.last_used = now;
        Some(cached.index.clone())
    }

    /// Keeps the user's index read at `version`, then evicts the least recently used
    /// users until the cache is within its budget (an index larger than the budget is
    /// not kept at all).
    pub fn insert(&self, scope: &MemoryScope, version: IndexVersion, index: Arc<VectorIndex>) {
        let size = index.bytes();
        let mut state = sync::lock(&self.inner);
        if let Some(old) = state.users.remove(scope) {
            state.bytes -= old.index.bytes();
        }
        if size > self.budget_bytes {
            return;
        }
        while state.bytes + size > self.budget_bytes {
            let Some(oldest) = state
                .users
                .iter()
                .min_by_key(|(_, c)| c.last_used)
                .map(|(s, _)| s.clone())
            else {
                break;
            };
            if let Some(evicted) = state.users.remove(&oldest) {
                state.bytes -= evicted.index.bytes();
            }
        }
        state.uses += 1;
        let last_used = state.uses;
        state.bytes += size;
        state.users.insert(
            scope.clone(),
            Cached {
                version,
                index,
                last_used,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(vectors: &[(&str, &[f32])]) -> VectorIndex {
        VectorIndex::new(vectors.iter().map(|(id, v)| (id.to_string(), v.to_vec())).collect())
    }

    #[test]
    fn ranks_by_cosine_best_first_ties_by_id_and_skips_the_unrelated() {
        let index = index(&[
            ("far", &[0.0, 1.0]),
            ("b-same", &[2.0, 0.0]),
            ("a-same", &[1.0, 0.0]),
            ("near", &[1.0, 0.5]),
            ("zero", &[0.0, 0.0]),
            ("other-model", &[1.0, 0.0, 0.0]),
        ]);
        let ranked = index.rank(&[3.0, 0.0], 10);
        let ids: Vec<&str> = ranked.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a-same", "b-same", "near"], "{ranked:?}");
        assert!((ranked[0].1 - 1.0).abs() < 1e-6);
        assert!((ranked[2].1 - 1.0 / 1.25f64.sqrt()).abs() < 1e-6);
        assert_eq!(index.rank(&[3.0, 0.0], 2).len(), 2);
        assert!(
            index.rank(&[0.0, 0.0], 10).is_empty(),
            "a zero query is similar to nothing"
        );
        assert_eq!(index.rank(&[1.0, 0.0, 0.0], 10)[0].0, "other-model");
    }

    #[test]
    fn only_the_best_are_kept_whatever_the_order_of_the_rows() {
        let vectors: Vec<(String, Vec<f32>)> = (0..1000)
            .map(|i| (format!("m{i:04}"), vec![1.0, (i % 97) as f32 / 97.0, 0.1]))
            .collect();
        let brute: Vec<String> = {
            let mut all: Vec<(String, f32)> = vectors
                .iter()
                .map(|(id, v)| (id.clone(), super::super::cosine(&[1.0, 0.0, 0.1], v)))
                .collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            all.into_iter().take(10).map(|(id, _)| id).collect()
        };
        let ranked: Vec<String> = VectorIndex::new(vectors)
            .rank(&[1.0, 0.0, 0.1], 10)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ranked, brute);
    }

    /// Every vector at least [`MIN_SIMILARITY`] from `query`, by exact cosine, best first
    /// (ties by id): what a ranking must return.
    fn exact_ranking(vectors: &[(String, Vec<f32>)], query: &[f32]) -> Vec<(String, f32)> {
        let mut exact: Vec<(String, f32)> = vectors
            .iter()
            .map(|(id, v)| (id.clone(), super::super::cosine(query, v)))
            .filter(|(_, similarity)| *similarity >= MIN_SIMILARITY)
            .collect();
        exact.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        exact
    }

    #[test]
    fn the_eight_bit_pass_keeps_the_exact_best_of_many_close_vectors() {
        // A deterministic generator (xorshift): no dependency for a test's noise.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut noise = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        let base: Vec<f32> = (0..384).map(|_| noise()).collect();
        // Similarities to the query spread over 0.2-0.9, thousands of them close together.
        let vectors: Vec<(String, Vec<f32>)> = (0..5000)
            .map(|i| {
                let weight = 0.4 + (i % 50) as f32 / 40.0;
                let vector = base.iter().map(|b| b * weight + noise() * 0.9).collect();
                (format!("m{i:05}"), vector)
            })
            .collect();
        let query: Vec<f32> = base.iter().map(|b| b + noise() * 0.2).collect();
        let exact = exact_ranking(&vectors, &query);
        assert!(exact.len() > 1000, "the case has many candidates: {}", exact.len());
        let index = VectorIndex::new(vectors);
        for limit in [1, 10, 100] {
            let ranked = index.rank(&query, limit);
            let ids: Vec<&str> = ranked.iter().map(|(id, _)| id.as_str()).collect();
            let want: Vec<&str> = exact.iter().take(limit).map(|(id, _)| id.as_str()).collect();
            assert_eq!(ids, want, "limit {limit}");
            for ((_, got), (_, want)) in ranked.iter().zip(&exact) {
                assert!((*got as f32 - want).abs() < 1e-5, "the exact similarity is returned");
            }
        }
    }

    #[test]
    fn a_scan_split_over_threads_ranks_rows_of_both_halves_as_one() {
        let rows = PARALLEL_SCAN_ROWS * 2 + 3;
        let vectors: Vec<(String, Vec<f32>)> = (0..rows)
            // Every thousandth row near the query, further the later it comes; the rest unrelated.
            .map(|i| {
                let vector = match i % 1000 {
                    0 => vec![1.0, 0.0, i as f32 / 50_000.0],
                    _ => vec![0.0, 1.0, 0.0],
                };
                (format!("m{i:06}"), vector)
            })
            .collect();
        let query = [1.0, 0.0, 0.0];
        let exact = exact_ranking(&vectors, &query);
        let want: Vec<String> = exact.into_iter().take(50).map(|(id, _)| id).collect();
        let middle = format!("m{:06}", rows / 2);
        assert!(
            want.iter().any(|id| *id < middle) && want.iter().any(|id| *id > middle),
            "the best are in both halves: {want:?}"
        );
        let ranked: Vec<String> = VectorIndex::new(vectors)
            .rank(&query, 50)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(ranked, want);
    }

    #[test]
    fn the_cache_answers_only_at_the_version_it_read_and_keeps_to_its_budget() {
        let version = |writes| {
            let postings = Postings {
                entries: 1,
                total_length: 1,
                writes,
                terms: Vec::new(),
            };
            postings.version()
        };
        let one = Arc::new(index(&[("m", &[1.0; 16])]));
        let size = one.bytes();
        let cache = VectorCache::new(size * 2);
        let (a, b, c) = (
            MemoryScope::new("app", "a"),
            MemoryScope::new("app", "b"),
            MemoryScope::new("app", "c"),
        );
        cache.insert(&a, version(1), one.clone());
        assert!(cache.get(&a, version(1)).is_some());
        assert!(cache.get(&a, version(2)).is_none(), "a write since: read again");
        cache.insert(&b, version(1), one.clone());
        assert!(cache.get(&a, version(1)).is_some(), "a used last");
        cache.insert(&c, version(1), one.clone());
        assert!(cache.get(&b, version(1)).is_none(), "the least recently used went");
        assert!(cache.get(&a, version(1)).is_some() && cache.get(&c, version(1)).is_some());
        let huge = Arc::new(index(&[("m", &[1.0; 64])]));
        cache.insert(&a, version(2), huge);
        assert!(cache.get(&a, version(2)).is_none(), "larger than the budget: not kept");
        assert!(cache.get(&c, version(1)).is_some());
    }
}
