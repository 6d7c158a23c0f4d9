-- seatq's schema laid out on a Citus cluster, sharded by event: applied by
-- seatq_core::citus::lay_out (seatq migrate, and every connect that
-- migrates) once the migrations are, on a database with the citus extension.
-- One transaction: it is laid out whole or not at all.
--
-- seats, bookings, requests and the waiting list are distributed by
-- event_id and colocated: an event's seats, bookings, requests and waiting
-- parties are on one node, and a batch,
-- which serves one event (worker/src/agenda.rs), is a transaction on that
-- node alone. events is a reference table (a copy on every node, read
-- where the batch runs). workers, the registry, stays on the coordinator:
-- heartbeats touch no worker node.

-- Citus needs the distribution column in every primary key and unique
-- index: a request and a booking are known by (event, id), and an
-- idempotency key is unique per producer and event (docs/operations.md
-- "Running on Citus"). The claim seeks one event's queued requests.
ALTER TABLE seatq.requests DROP CONSTRAINT requests_pkey, ADD PRIMARY KEY (event_id, id),
    ALTER COLUMN event_id DROP DEFAULT;
DROP INDEX seatq.requests_idempotency_key;
CREATE UNIQUE INDEX requests_idempotency_key ON seatq.requests (event_id, producer, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
DROP INDEX seatq.requests_ready;
CREATE INDEX requests_ready ON seatq.requests (event_id, priority DESC, run_at, id) WHERE status = 'queued';
ALTER TABLE seatq.bookings DROP CONSTRAINT bookings_pkey, ADD PRIMARY KEY (event_id, id);

-- Triggers on distributed tables run on the worker nodes, beside the
-- shards. The insert trigger (validation, the token's hash, the event) is
-- shard-local and runs there. The announcement of new requests would be
-- raised on a worker node, out of the listeners' hearing: seatq.enqueue
-- announces on the coordinator instead (0010_event_routing.sql). A limit
-- given to an event later marks its bookings from the trigger on one
-- server; on Citus an event's bookings are marked by `seatq event edit`.
DROP TRIGGER requests_notify_new ON seatq.requests;
DROP TRIGGER events_limit_added ON seatq.events;
SET LOCAL citus.enable_unsafe_triggers = on;

SELECT create_reference_table('seatq.events');
SELECT create_distributed_table('seatq.seats', 'event_id');
SELECT create_distributed_table('seatq.bookings', 'event_id', colocate_with => 'seatq.seats');
SELECT create_distributed_table('seatq.requests', 'event_id', colocate_with => 'seatq.seats');
SELECT create_distributed_table('seatq.waiting', 'event_id', colocate_with => 'seatq.seats');

CREATE OR REPLACE FUNCTION seatq.distributed() RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT true
$$;

-- Retention (0001_queue.sql's seatq.prune_finished) over every shard: Citus
-- refuses a row lock or a LIMIT in a statement that spans shards, so the
-- finished requests past retention are deleted in one statement, each
-- node deleting its own (p_limit is not applied; requests are deleted, as
-- on one server, only when finished and not dead).
CREATE OR REPLACE FUNCTION seatq.prune_finished(p_older_than_secs float8, p_limit bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_deleted bigint;
BEGIN
    DELETE FROM seatq.requests
    WHERE status <> 'queued' AND status <> 'dead'
      AND finished_at < now() - greatest(p_older_than_secs, 0) * interval '1 second';
    GET DIAGNOSTICS v_deleted = ROW_COUNT;
    RETURN v_deleted;
END
$$;


-- The roles' rights on the distributed tables (0006_roles.sql,
-- 0010_event_routing.sql), given again now that the tables are: Citus gives
-- a GRANT made on a distributed table to its shards, and not those made
-- before it was distributed. (The row-level security policies came with
-- the tables.)
-- Producers insert into the whole table: Citus writes every column of a new
-- row to its shard (the defaults filled in on the coordinator), so a grant of
-- some columns would refuse every insert there. What the column grant kept
-- from them on one server, the policies and the insert trigger keep: the
-- producer is theirs (producer_inserts_own), a request has no outcome
-- (seatq.fail_invalid_request) and no token hash of theirs.
GRANT INSERT ON seatq.requests TO seatq_producer;
GRANT SELECT ON seatq.requests, seatq.bookings, seatq.events TO seatq_producer;
GRANT SELECT, UPDATE ON seatq.requests TO seatq_worker;
GRANT SELECT ON seatq.events TO seatq_worker;
GRANT SELECT, UPDATE ON seatq.seats TO seatq_worker;
GRANT SELECT, INSERT, UPDATE ON seatq.bookings TO seatq_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON seatq.waiting TO seatq_worker;
GRANT ALL ON seatq.requests, seatq.events, seatq.seats, seatq.bookings, seatq.waiting TO seatq_admin;
