-- seatq: the request queue, in schema `seatq` (inventory and bookings are in
-- 0003_inventory.sql).
--
-- The database is the public interface: producers in any language enqueue
-- with `SELECT seatq.enqueue(kind, payload)` (or a plain INSERT into
-- seatq.requests) and read the outcome with one SELECT on seatq.requests.
--
-- The migrator creates the schema before this runs, so that its own
-- bookkeeping table, seatq._sqlx_migrations, lives in it too (a host
-- application's migrations in `public` are left alone).

CREATE SCHEMA IF NOT EXISTS seatq;

-- A request is never visibly "running": claim, allocation and outcome commit
-- in one transaction, so a request is queued until it is finished.
CREATE TYPE seatq.request_status AS ENUM ('queued', 'succeeded', 'failed', 'dead');

CREATE TABLE seatq.requests (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- hold | book | confirm | cancel. Plain text on purpose: a request with
    -- an unknown kind is accepted and then failed with a clear error.
    kind               text NOT NULL,
    payload            jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- A second enqueue by the same producer with the same key returns the
    -- first request (unique per producer through the partial index
    -- requests_idempotency_key); another producer's key is another key.
    idempotency_key    text,
    -- The role that inserted the request, set by the database: the role the
    -- session runs as (current_user: the login, or the shop's role it took
    -- with SET ROLE). Producers may not write it (their INSERT grant leaves
    -- it out, 0006_roles.sql), so it cannot be forged; row-level security
    -- lets a producer see only its own requests, and the bookings they made
    -- carry it on (seatq.bookings.producer).
    producer           text NOT NULL DEFAULT current_user,
    priority           smallint NOT NULL DEFAULT 0,
    status             seatq.request_status NOT NULL DEFAULT 'queued',
    -- Processing attempts that ended in an unexpected error.
    attempts           int NOT NULL DEFAULT 0,
    max_attempts       int NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    -- Times the request found its seats locked by in-flight transactions.
    contention_retries int NOT NULL DEFAULT 0,
    run_at             timestamptz NOT NULL DEFAULT now(),
    created_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz,
    result             jsonb,
    error_code         text,
    error_message      text,
    -- A request submitted in a batch (a file of parties, docs/group-bookings.md):
    -- the batch's name, the submitter's own reference for the line (`ref`), if
    -- any, and the line's number in the file it was first submitted from. NULL
    -- outside a batch. Kept on the request itself, so that reading a batch is a
    -- plain SELECT on this table, answered for whoever may read the requests.
    batch              text CHECK (char_length(batch) BETWEEN 1 AND 200),
    batch_ref          text CHECK (char_length(batch_ref) BETWEEN 1 AND 200),
    batch_line         int CHECK (batch_line > 0),
    CONSTRAINT batch_ref_in_batch CHECK (batch IS NOT NULL OR (batch_ref IS NULL AND batch_line IS NULL)),
    CONSTRAINT outcome_matches_status CHECK (
        (status = 'queued')
     OR (status = 'succeeded' AND result IS NOT NULL AND error_code IS NULL)
     OR (status IN ('failed', 'dead') AND error_code IS NOT NULL AND result IS NULL))
);
-- The claim: an index seek over queued rows only, in claim order.
CREATE INDEX requests_ready ON seatq.requests (priority DESC, run_at, id) WHERE status = 'queued';
-- Retention: finished requests by age, pruned in small batches.
CREATE INDEX requests_finished ON seatq.requests (finished_at) WHERE status <> 'queued';
-- Requests without an idempotency key (most of them) need no entry in the
-- key's index, on insert or on the update that records their outcome. Keys
-- are scoped per producer: two shops may use the same key for their own
-- requests, and neither learns of the other's.
CREATE UNIQUE INDEX requests_idempotency_key ON seatq.requests (producer, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- A batch's requests (`seatq batch status`, `seatq batch results`); requests
-- outside a batch have no entry.
CREATE INDEX requests_batch ON seatq.requests (batch, batch_line) WHERE batch IS NOT NULL;

-- The queue table churns (every request is updated once and later deleted):
-- vacuum it after 2% of it changed rather than the default 20%, so dead
-- tuples do not pile up at the head of the claim index.
ALTER TABLE seatq.requests SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);

-- Enqueue one request; with an idempotency key this producer (current_user)
-- already used, return the first request's id instead of inserting a second
-- one, provided the kind and
-- payload are the first request's too (compared as jsonb: key order and
-- spacing do not matter). A key reused for another kind or payload is a
-- mistake that would otherwise pass silently, so it is refused with seatq's
-- own SQLSTATE SQ001, its message starting with the code
-- `idempotency_conflict` (core/src/sqlstate.rs), and nothing is inserted. (A
-- request failed as payload_too_large keeps '{}' for its payload,
-- 0002_validation.sql: any payload over the limit is its payload again.) A
-- NULL run_at means now. p_batch, p_batch_ref and p_batch_line tag a request of
-- a batch (on the first enqueue only: a repeat returns the first request as it
-- is). The priority is an
-- int here but a smallint in the table: out of range, it fails naming the
-- argument and the range (SQLSTATE 22003) rather than with a bare "smallint
-- out of range".
--
-- Two inputs never reach validation (0002_validation.sql), because jsonb
-- itself decides them while parsing, before any trigger or function sees the
-- payload:
--
-- * A string containing U+0000 (\u0000) is refused by jsonb: the INSERT or
--   the seatq.enqueue call fails with SQLSTATE 22P05 and nothing is stored.
--   The Rust client refuses such a payload first, as invalid_request naming
--   the field (core/src/validate.rs).
-- * A number is stored by its value, not as written: 2E0 is stored as 2 and
--   1.5e1 as 15, so they are integers here. A fraction is kept (2.0 stays
--   2.0) and is wrong_type, as in Rust. A Rust producer parsing JSON text
--   reads any number written with an exponent as a float, so a bulk file
--   line with "party": 2E0 is wrong_type there; a payload built in Rust
--   never carries one (serde_json writes 2.0).
CREATE FUNCTION seatq.enqueue(
    p_kind text,
    p_payload jsonb,
    p_idempotency_key text DEFAULT NULL,
    p_priority int DEFAULT 0,
    p_run_at timestamptz DEFAULT now(),
    p_batch text DEFAULT NULL,
    p_batch_ref text DEFAULT NULL,
    p_batch_line int DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_kind text;
    v_payload jsonb;
    v_code text;
BEGIN
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767'
            USING ERRCODE = 'numeric_value_out_of_range', DETAIL = format('priority %s was given', p_priority);
    END IF;
    INSERT INTO seatq.requests (kind, payload, idempotency_key, priority, run_at, batch, batch_ref, batch_line)
    VALUES (p_kind, p_payload, p_idempotency_key, p_priority, coalesce(p_run_at, now()), p_batch, p_batch_ref, p_batch_line)
    ON CONFLICT (producer, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        SELECT id, kind, payload, error_code INTO v_id, v_kind, v_payload, v_code
        FROM seatq.requests WHERE producer = current_user AND idempotency_key = p_idempotency_key;
        IF v_kind IS DISTINCT FROM p_kind
           OR (v_payload IS DISTINCT FROM p_payload
               AND NOT (v_code IS NOT DISTINCT FROM 'payload_too_large'
                        AND (seatq.request_error(p_kind, p_payload)).code = 'payload_too_large')) THEN
            RAISE EXCEPTION 'idempotency_conflict: idempotency key % was first used by request % with another kind or payload',
                seatq.quoted(p_idempotency_key), v_id
                USING ERRCODE = 'SQ001',
                      HINT = 'Use a new key for a new request; the same key with the same kind and payload returns the first request.';
        END IF;
    END IF;
    RETURN v_id;
END
$$;

-- Retention: delete up to p_limit succeeded or failed requests that finished
-- more than p_older_than_secs seconds ago, oldest first, skipping rows
-- locked; returns how many. Queued requests are never touched, and dead ones
-- are kept (an operator may still retry them). The worker prunes in the
-- background with it (worker/src/retention.rs), `seatq prune` on demand.
--
-- SECURITY DEFINER (it runs as the role that applied the migrations, with a
-- fixed search_path): the worker role may execute it but has no DELETE on
-- the table (0006_roles.sql), so a worker login can delete finished requests
-- past its retention and nothing else. (`status <> 'queued'` lets the
-- partial index requests_finished serve it.)
CREATE FUNCTION seatq.prune_finished(p_older_than_secs float8, p_limit bigint) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH old AS (
        SELECT id FROM seatq.requests
        WHERE status <> 'queued' AND status <> 'dead'
          AND finished_at < now() - greatest(p_older_than_secs, 0) * interval '1 second'
        ORDER BY finished_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), deleted AS (
        DELETE FROM seatq.requests r USING old WHERE r.id = old.id RETURNING 1
    )
    SELECT count(*) FROM deleted
$$;

-- Wake idle workers. One notification per statement, not per row; it is only
-- a hint (workers also poll), so a lost notification delays, never loses.
CREATE FUNCTION seatq.notify_new_requests() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('seatq_new', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER requests_notify_new AFTER INSERT ON seatq.requests
    FOR EACH STATEMENT EXECUTE FUNCTION seatq.notify_new_requests();

-- The worker registry: each worker process registers itself and heartbeats;
-- a row whose heartbeat is old belongs to a dead process and is dropped by
-- the live ones.
CREATE TABLE seatq.workers (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL,
    host         text NOT NULL,
    pid          int NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    settings     jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- The advisory-lock key of the worker process on host p_host with pid
-- p_pid: its life lock, which the process holds on a connection of its own
-- for as long as it runs, and which another worker waits for so as to take
-- over its requests the moment it dies (worker/src/rescue.rs). A bigint
-- key, like seatq.customer_lock's, from text of another shape.
CREATE FUNCTION seatq.worker_lock(p_host text, p_pid int) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('seatq-worker:' || p_host || ':' || p_pid, 0)
$$;
