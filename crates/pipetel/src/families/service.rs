//! The task and queue families of `ServiceMetrics`. Their names are relative to the service
//! prefix: `tasks.created` is `service.tasks.created` (`service_tasks_created_total`) under
//! the default prefix.

use super::family::{Family, Instrument::*};

/// Tasks created (submitted to the queue).
pub const TASKS_CREATED: Family =
    Family::new("tasks.created", Counter, "{task}", "Tasks created (submitted to the queue)", &[]);
/// Tasks that completed successfully.
pub const TASKS_COMPLETED: Family =
    Family::new("tasks.completed", Counter, "{task}", "Tasks that completed successfully", &[]);
/// Tasks that failed.
pub const TASKS_FAILED: Family = Family::new("tasks.failed", Counter, "{task}", "Tasks that failed", &[]);
/// Tasks cancelled or dropped unfinished.
pub const TASKS_CANCELLED: Family =
    Family::new("tasks.cancelled", Counter, "{task}", "Tasks cancelled or dropped unfinished", &[]);
/// Time from a task's start to its completion or failure.
pub const TASK_DURATION: Family =
    Family::new("task.duration", Histogram, "s", "Time from a task's start to its completion or failure", &[]);
/// Time a task waited in the queue before it started.
pub const TASK_QUEUE_WAIT: Family =
    Family::new("task.queue.wait", Histogram, "s", "Time a task waited in the queue before it started", &[]);
/// Tasks in the queue, pending and processing.
pub const QUEUE_SIZE: Family =
    Family::new("queue.size", Gauge, "{task}", "Tasks in the queue, pending and processing", &[]);
/// Tasks waiting to start.
pub const QUEUE_PENDING: Family = Family::new("queue.pending", Gauge, "{task}", "Tasks waiting to start", &[]);
/// Tasks being processed.
pub const QUEUE_PROCESSING: Family = Family::new("queue.processing", Gauge, "{task}", "Tasks being processed", &[]);

/// Every family of the table, in the reference's order.
pub const ALL: &[Family] = &[
    TASKS_CREATED,
    TASKS_COMPLETED,
    TASKS_FAILED,
    TASKS_CANCELLED,
    TASK_DURATION,
    TASK_QUEUE_WAIT,
    QUEUE_SIZE,
    QUEUE_PENDING,
    QUEUE_PROCESSING,
];
