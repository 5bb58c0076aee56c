//! Locks that survive a panic.
//!
//! A panic while a std lock is held poisons it, and every later `lock().unwrap()` panics too:
//! one failed request would fail every request after it. The data these locks guard (caches,
//! registries, counters, fake servers' queues) is whole after each statement that holds the
//! guard, so the suite takes the guard of a poisoned lock instead, in this one place.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, recovering it if a panic poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Read-locks `lock`, recovering it if a panic poisoned it.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Write-locks `lock`, recovering it if a panic poisoned it.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_taken_with_the_data_it_held() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let rwlock = std::sync::Arc::new(RwLock::new(2));
        let (m, r) = (mutex.clone(), rwlock.clone());
        let _ = std::thread::spawn(move || {
            let _held = m.lock().unwrap();
            let _written = r.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(mutex.is_poisoned() && rwlock.is_poisoned());
        *lock(&mutex) += 1;
        *write(&rwlock) += 1;
        assert_eq!((*lock(&mutex), *read(&rwlock)), (2, 3));
    }
}
