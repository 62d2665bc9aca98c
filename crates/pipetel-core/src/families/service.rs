//! The task and queue families of `ServiceMetrics`. Their names are relative to the service
//! prefix: `tasks.created` is `service.tasks.created` (`service_tasks_created_total`) under
//! the default prefix.

use super::family::families;

families! {
    TASKS_CREATED = "tasks.created", Counter, "{task}", &[], "Tasks created (submitted to the queue)";
    TASKS_COMPLETED = "tasks.completed", Counter, "{task}", &[], "Tasks that completed successfully";
    TASKS_FAILED = "tasks.failed", Counter, "{task}", &[], "Tasks that failed";
    TASKS_CANCELLED = "tasks.cancelled", Counter, "{task}", &[], "Tasks cancelled or dropped unfinished";
    TASK_DURATION = "task.duration", Histogram, "s", &[], "Time from a task's start to its completion or failure";
    TASK_QUEUE_WAIT = "task.queue.wait", Histogram, "s", &[], "Time a task waited in the queue before it started";
    QUEUE_SIZE = "queue.size", Gauge, "{task}", &[], "Tasks in the queue, pending and processing";
    QUEUE_PENDING = "queue.pending", Gauge, "{task}", &[], "Tasks waiting to start";
    QUEUE_PROCESSING = "queue.processing", Gauge, "{task}", &[], "Tasks being processed";
}
