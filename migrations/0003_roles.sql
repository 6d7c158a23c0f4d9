-- Least privilege. Three group roles (NOLOGIN); grant one to each login:
--
--   CREATE ROLE shop LOGIN PASSWORD '…' IN ROLE seatq_producer;
--   CREATE ROLE worker1 LOGIN PASSWORD '…' IN ROLE seatq_worker;
--   CREATE ROLE ops LOGIN PASSWORD '…' IN ROLE seatq_admin;
--
-- seatq_producer: enqueue requests and read outcomes; nothing else (no
--   access to seats or bookings, no changing a request once inserted).
-- seatq_worker:   what workers need: claim and finish requests, take and
--   release seats, write bookings.
-- seatq_admin:    everything in the schema: migrations, retries, pruning.
--
-- Roles belong to the whole server, so this tolerates their existing already
-- (another database on the same server created them).

DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['seatq_producer', 'seatq_worker', 'seatq_admin'] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END
$$;

REVOKE ALL ON SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA seatq FROM PUBLIC;
GRANT USAGE ON SCHEMA seatq TO seatq_producer, seatq_worker, seatq_admin;

-- Producers: enqueue (the function, or a plain INSERT of the request's own
-- columns) and read outcomes. The trigger functions run with the inserter's
-- rights, so the validation helpers are theirs to execute too.
GRANT INSERT (kind, payload, idempotency_key, priority, run_at) ON seatq.requests TO seatq_producer;
GRANT SELECT ON seatq.requests, seatq.events TO seatq_producer;
GRANT EXECUTE ON FUNCTION
    seatq.enqueue(text, jsonb, text, int, timestamptz),
    seatq.request_error(text, jsonb),
    seatq.is_json_int(jsonb),
    seatq.describe_json(jsonb),
    seatq.fail_invalid_request(),
    seatq.notify_new_requests()
TO seatq_producer, seatq_worker, seatq_admin;

-- Workers.
GRANT SELECT, UPDATE ON seatq.requests TO seatq_worker;
GRANT SELECT ON seatq.events TO seatq_worker;
GRANT SELECT, UPDATE ON seatq.seats TO seatq_worker;
GRANT SELECT, INSERT, UPDATE ON seatq.bookings TO seatq_worker;
GRANT EXECUTE ON FUNCTION seatq.check_invariants(boolean) TO seatq_worker;

-- Admins.
GRANT ALL ON SCHEMA seatq TO seatq_admin;
GRANT ALL ON ALL TABLES IN SCHEMA seatq TO seatq_admin;
GRANT ALL ON ALL FUNCTIONS IN SCHEMA seatq TO seatq_admin;

-- Every role may read which migrations are applied, so a program connecting
-- with it can tell the schema is current without trying to migrate.
GRANT SELECT ON public._sqlx_migrations TO seatq_producer, seatq_worker, seatq_admin;
