/**
 * NOTIFY channel the SSE stream listens on for new job events. Payload: the job id (a payload
 * that starts with the job id, or an empty payload, wakes that job's streams). Without any
 * NOTIFY the stream still works by polling.
 */
export const jobEventsChannel = "job_events";
