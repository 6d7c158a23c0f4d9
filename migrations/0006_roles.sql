-- Least privilege. Three group roles (NOLOGIN); grant one to each login:
--
--   CREATE ROLE shop LOGIN PASSWORD '…' IN ROLE seatq_producer;
--   CREATE ROLE worker1 LOGIN PASSWORD '…' IN ROLE seatq_worker;
--   CREATE ROLE ops LOGIN PASSWORD '…' IN ROLE seatq_admin;
--
-- seatq_producer: enqueue requests and read outcomes; nothing else (no
--   access to seats or bookings, no changing a request once inserted).
-- seatq_worker:   what workers need: claim and finish requests, take and
--   release seats, write bookings, register themselves.
-- seatq_admin:    every privilege on the schema's tables and functions:
--   retries, pruning, maintenance. (Applying migrations needs the
--   database's owner or a superuser: they create and replace objects.)
--
-- Every grant of the schema is here, so this runs last.
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

-- Nothing for anyone else (a function is executable by PUBLIC unless
-- revoked).
REVOKE ALL ON SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA seatq FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA seatq FROM PUBLIC;
GRANT USAGE ON SCHEMA seatq TO seatq_producer, seatq_worker, seatq_admin;

-- Every role may read which migrations are applied, so a program connecting
-- with it can tell the schema is current without trying to migrate.
GRANT SELECT ON seatq._sqlx_migrations TO seatq_producer, seatq_worker, seatq_admin;

-- Producers: enqueue (the function, or a plain INSERT of the request's own
-- columns) and read outcomes and who is working. The trigger functions run
-- with the inserter's rights, so the validation helpers are theirs to
-- execute too.
GRANT INSERT (kind, payload, idempotency_key, priority, run_at, batch, batch_ref, batch_line) ON seatq.requests
    TO seatq_producer;
GRANT SELECT ON seatq.requests, seatq.events, seatq.workers TO seatq_producer;
GRANT EXECUTE ON FUNCTION
    seatq.enqueue(text, jsonb, text, int, timestamptz, text, text, int),
    seatq.request_error(text, jsonb),
    seatq.range_error(text, numeric, numeric, numeric),
    seatq.is_json_int(jsonb),
    seatq.describe_json(jsonb),
    seatq.fail_invalid_request(),
    seatq.notify_new_requests()
TO seatq_producer, seatq_worker, seatq_admin;
-- Why an event's sales refuse now, as `seatq event list` shows it (a pure
-- function of the event's own columns).
GRANT EXECUTE ON FUNCTION seatq.sale_refusal(timestamptz, timestamptz, timestamptz) TO seatq_producer;

-- Workers. The state predicates are part of their statements (a predicate a
-- role may not execute is not inlined, and then fails).
GRANT SELECT, UPDATE, DELETE ON seatq.requests TO seatq_worker;
GRANT SELECT ON seatq.events TO seatq_worker;
GRANT SELECT, UPDATE ON seatq.seats TO seatq_worker;
GRANT SELECT, INSERT, UPDATE ON seatq.bookings TO seatq_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON seatq.workers TO seatq_worker;
GRANT EXECUTE ON FUNCTION
    seatq.is_free(seatq.seat_state, timestamptz),
    seatq.is_live(seatq.seat_state, timestamptz),
    seatq.is_live(seatq.booking_state, timestamptz),
    seatq.is_lapsed(seatq.seat_state, timestamptz),
    seatq.is_lapsed(seatq.booking_state, timestamptz),
    seatq.sale_refusal(timestamptz, timestamptz, timestamptz),
    seatq.sales_end(timestamptz, timestamptz),
    seatq.customer_lock(bigint, text),
    seatq.customer_seats(bigint, text),
    seatq.lock_cheapest_spread(bigint, smallint, int),
    seatq.check_invariants(boolean)
TO seatq_worker;

-- Admins: all of seatq's own tables and functions (the migrations table
-- only to read, as for the others).
GRANT ALL ON SCHEMA seatq TO seatq_admin;
GRANT ALL ON seatq.requests, seatq.events, seatq.seats, seatq.bookings, seatq.workers TO seatq_admin;
GRANT ALL ON ALL FUNCTIONS IN SCHEMA seatq TO seatq_admin;
