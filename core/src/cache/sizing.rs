//! Sizing a RAM budget from the machine: [`machine_ram`] and [`ram_cap`].
//!
//! A model server sizes its [`CacheGroup`](super::CacheGroup)'s cap to what the process may
//! really use. In a container that is the cgroup's memory limit, not the host's memory (a
//! container that trusts the host's figure is killed by the OOM killer well before it reaches
//! it), so the cgroup comes first; without one it is the memory the host has available now.

/// Where [`machine_ram`] found the memory it reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RamSource {
    /// The memory limit of the process's cgroup (Linux containers, systemd slices).
    CGroup,
    /// The host's available memory (free plus reclaimable), with no cgroup limit in force.
    Available,
}

/// The RAM this process can still use, and where that figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineRam {
    /// Bytes still usable: under a cgroup, its limit minus what the cgroup uses now; otherwise
    /// the host's available memory.
    pub usable: u64,
    /// Under a cgroup, its limit; otherwise the host's total memory.
    pub total: u64,
    /// Where the figures came from.
    pub source: RamSource,
}

/// Why no RAM cap could be derived.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RamCapError {
    /// The fraction is not in `(0, 1]`.
    #[error("the fraction of usable RAM must be in (0, 1], got {fraction}")]
    InvalidFraction {
        /// The fraction given.
        fraction: f64,
    },
    /// The operating system reported no usable memory.
    #[error("the system reports no usable memory ({from:?}: {usable} of {total} bytes)")]
    NoMemory {
        /// Where the figures came from.
        from: RamSource,
        /// Usable bytes reported.
        usable: u64,
        /// Total bytes reported.
        total: u64,
    },
}

/// The RAM this process can still use: the cgroup's limit (minus its usage) when one is in
/// force, else the host's available memory. Reads the system once; call it at startup, before
/// the models are loaded.
pub fn machine_ram() -> MachineRam {
    let mut system = sysinfo::System::new();
    system.refresh_memory();
    match system.cgroup_limits() {
        Some(cgroup) if cgroup.total_memory > 0 && cgroup.total_memory < system.total_memory() => {
            MachineRam { usable: cgroup.free_memory, total: cgroup.total_memory, source: RamSource::CGroup }
        }
        _ => MachineRam {
            usable: system.available_memory(),
            total: system.total_memory(),
            source: RamSource::Available,
        },
    }
}

/// A RAM cap for a [`CacheGroup`](super::CacheGroup): `fraction` of [`machine_ram`]'s usable
/// bytes (leave the rest to the process's own allocations, the inputs and outputs of
/// inference, and the allocator's overhead).
///
/// ```
/// use resident::cache::{CacheGroup, ram_cap};
///
/// let cap = ram_cap(0.5).expect("the machine reports its memory");
/// let group = CacheGroup::<Vec<u8>>::new(cap).expect("a positive cap");
/// assert_eq!(group.budget().cap(), cap);
/// ```
pub fn ram_cap(fraction: f64) -> Result<u64, RamCapError> {
    cap_of(machine_ram(), fraction)
}

/// `fraction` of `ram`'s usable bytes, rounded down.
fn cap_of(ram: MachineRam, fraction: f64) -> Result<u64, RamCapError> {
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(RamCapError::InvalidFraction { fraction });
    }
    // Exact for every realistic size (below 2^53 bytes); the cast saturates beyond.
    let cap = (ram.usable as f64 * fraction) as u64;
    if cap == 0 {
        return Err(RamCapError::NoMemory { from: ram.source, usable: ram.usable, total: ram.total });
    }
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAM: MachineRam = MachineRam { usable: 1000, total: 4000, source: RamSource::CGroup };

    #[test]
    fn the_cap_is_a_fraction_of_the_usable_bytes() {
        assert_eq!(cap_of(RAM, 0.5), Ok(500));
        assert_eq!(cap_of(RAM, 1.0), Ok(1000));
        assert_eq!(cap_of(RAM, 0.0015), Ok(1));
    }

    #[test]
    fn a_fraction_outside_zero_to_one_is_refused() {
        for fraction in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(cap_of(RAM, fraction), Err(RamCapError::InvalidFraction { .. })),
                "{fraction} was accepted"
            );
        }
    }

    #[test]
    fn no_usable_memory_is_an_error_not_a_zero_cap() {
        let none = MachineRam { usable: 0, ..RAM };
        assert!(matches!(cap_of(none, 0.5), Err(RamCapError::NoMemory { usable: 0, .. })));
        assert!(matches!(cap_of(RAM, 0.0001), Err(RamCapError::NoMemory { .. })));
    }

    #[test]
    fn this_machine_reports_its_memory() {
        let ram = machine_ram();
        assert!(ram.usable > 0 && ram.usable <= ram.total, "{ram:?}");
        let cap = ram_cap(0.25).expect("a cap");
        assert!(cap > 0 && cap <= ram.total);
    }
}
