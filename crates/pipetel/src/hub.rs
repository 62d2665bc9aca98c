//! The snapshot hub: exports the latest merged view of recorder snapshots sent by other processes.
