-- Hold tokens (core/src/token.rs): a hold or book may carry a `token` in
-- its payload, and the booking it makes then answers to that token alone:
-- confirm, cancel and extend must carry it too, and a wrong or missing one
-- is answered as a booking that does not exist (the worker compares, in
-- constant time). Bookings made without one keep the customer-name check,
-- so producers that send no tokens keep working unchanged.
--
-- No token is ever stored: the insert trigger takes `token` out of the
-- payload and keeps its SHA-256 in requests.token_hash; the worker copies a
-- hold's hash onto its booking. Whoever can read the tables can read the
-- hashes, and a hash is not a token: a request presenting the hash itself
-- is hashed again and matches nothing.

ALTER TABLE seatq.requests ADD COLUMN token_hash bytea CHECK (octet_length(token_hash) = 32);
ALTER TABLE seatq.bookings ADD COLUMN token_hash bytea CHECK (octet_length(token_hash) = 32);

-- Customers in one normal form (core/src/customer.rs: NFKC, lower-cased,
-- white space collapsed), computed by the worker, which writes it beside
-- the name as given: "Ann" and " ANN" are one customer to a per-customer
-- limit. NULL where the name as given is its normal form already (most
-- names), and on bookings made before: the name stands for it.
ALTER TABLE seatq.bookings ADD COLUMN customer_key text;
DROP INDEX seatq.bookings_by_customer;
CREATE INDEX bookings_by_customer ON seatq.bookings (event_id, producer, (coalesce(customer_key, customer)))
    WHERE limited;

-- seatq.customer_seats as 0003_inventory.sql made it, by the customer's
-- normal form (p_customer is one).
CREATE OR REPLACE FUNCTION seatq.customer_seats(p_event bigint, p_producer text, p_customer text) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT coalesce(sum(cardinality(b.seats)), 0)::bigint FROM seatq.bookings b
    WHERE b.event_id = p_event AND b.producer = p_producer AND coalesce(b.customer_key, b.customer) = p_customer
      AND b.limited AND seatq.is_live(b.state, b.held_until)
$$;

-- A token's hash as stored: SHA-256 of its text (HoldToken::hash).
CREATE FUNCTION seatq.token_hash(p_token text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT sha256(convert_to(p_token, 'UTF8'))
$$;

-- A payload without its token (any other JSON as it is).
CREATE FUNCTION seatq.without_token(p_payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(p_payload) = 'object' THEN p_payload - 'token' ELSE p_payload END
$$;

-- A new token for SQL producers: 32 bytes in URL-safe base64, the form the
-- Rust client makes. gen_random_uuid() draws from the server's strong
-- random source; two of them give 244 random bits (a version 4 UUID fixes
-- 6 of its 128), and the token's form stays that of 32 bytes.
CREATE FUNCTION seatq.new_token() RETURNS text
LANGUAGE sql VOLATILE AS $$
    SELECT translate(rtrim(encode(decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'),
                                  'base64'), '='), '+/', '-_')
$$;

-- The error of the request's payload as it was before tokens, kept under
-- another name: seatq.request_error below checks the payload without its
-- token with it, then the token (validate::check in Rust, the same order).
ALTER FUNCTION seatq.request_error(text, jsonb) RENAME TO request_error_of_fields;

CREATE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_token jsonb := CASE WHEN jsonb_typeof(p_payload) = 'object' THEN p_payload -> 'token' END;
BEGIN
    SELECT e.code, e.message INTO code, message FROM seatq.request_error_of_fields(p_kind, seatq.without_token(p_payload)) e;
    IF code = 'unknown_field' THEN
        message := message || ', token';
    END IF;
    IF code IS NOT NULL OR v_token IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(v_token) <> 'string' THEN
        code := 'wrong_type';
        message := format('token: must be a string, not %s', seatq.describe_json(v_token));
    ELSIF v_token #>> '{}' !~ '^[A-Za-z0-9_-]{43}$' THEN
        code := 'invalid_request';
        message := 'token: must be 43 characters of A-Z, a-z, 0-9, - and _ (a hold token)';
    END IF;
END
$$;

-- The insert trigger, as 0002_validation.sql made it, and then the token:
-- its hash kept, the token itself taken out of the payload, whether the
-- request is valid or not. A hash a producer writes is never kept (the
-- column is not theirs to insert, and this overwrites it).
CREATE OR REPLACE FUNCTION seatq.fail_invalid_request() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
    v_code text;
    v_message text;
    v_token jsonb := CASE WHEN jsonb_typeof(NEW.payload) = 'object' THEN NEW.payload -> 'token' END;
BEGIN
    IF NEW.status = 'queued' THEN
        IF NEW.idempotency_key IS NOT NULL THEN
            e := seatq.idempotency_key_error(NEW.idempotency_key);
            IF e.code IS NOT NULL THEN
                RAISE EXCEPTION '%: %', e.code, e.message
                    USING ERRCODE = 'SQ002',
                          HINT = 'An idempotency key is at most 200 characters, without control characters.';
            END IF;
        END IF;
        -- Without a token (most requests), straight to the fields' check,
        -- whose list of fields for unknown_field lacks the token's.
        IF v_token IS NULL THEN
            e := seatq.request_error_of_fields(NEW.kind, NEW.payload);
            IF e.code = 'unknown_field' THEN
                e := seatq.request_error(NEW.kind, NEW.payload);
            END IF;
        ELSE
            e := seatq.request_error(NEW.kind, NEW.payload);
        END IF;
        v_code := e.code;
        v_message := e.message;
        IF v_code IS NULL THEN
            v_message := seatq.run_at_error(NEW.run_at);
            v_code := CASE WHEN v_message IS NOT NULL THEN 'run_at_out_of_range' END;
        END IF;
        IF v_code IS NOT NULL THEN
            NEW.status := 'failed';
            NEW.result := NULL;
            NEW.error_code := v_code;
            NEW.error_message := v_message;
            NEW.finished_at := now();
            IF v_code = 'payload_too_large' THEN
                NEW.payload := '{}'::jsonb;
            END IF;
            -- No client can read an infinite time (sqlx, for one, fails on
            -- it); the message keeps what was given.
            IF NOT isfinite(NEW.run_at) THEN
                NEW.run_at := now();
            END IF;
            PERFORM pg_notify('seatq_done', NEW.id::text);
        END IF;
    END IF;
    -- Most requests carry no token: their payload is left as it is, not copied.
    NEW.token_hash := NULL;
    IF v_token IS NOT NULL THEN
        NEW.token_hash := CASE WHEN jsonb_typeof(v_token) = 'string' THEN seatq.token_hash(v_token #>> '{}') END;
        NEW.payload := NEW.payload - 'token';
    END IF;
    RETURN NEW;
END
$$;

-- seatq.enqueue as 0001_queue.sql made it, comparing a repeated key's
-- request as stored: the payload without its token, and the token by its
-- hash (a retry must present the same token; another token under the same
-- key is another request, and refused).
CREATE OR REPLACE FUNCTION seatq.enqueue(
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
    v_token bytea;
    v_code text;
    v_given jsonb;
    v_given_token jsonb;
    v_given_hash bytea;
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
        -- A repeated key (rare): the request given, as it would be stored.
        v_given := seatq.without_token(p_payload);
        v_given_token := CASE WHEN jsonb_typeof(p_payload) = 'object' THEN p_payload -> 'token' END;
        v_given_hash := CASE WHEN jsonb_typeof(v_given_token) = 'string' THEN seatq.token_hash(v_given_token #>> '{}') END;
        SELECT id, kind, payload, token_hash, error_code INTO v_id, v_kind, v_payload, v_token, v_code
        FROM seatq.requests WHERE producer = current_user AND idempotency_key = p_idempotency_key;
        IF v_kind IS DISTINCT FROM p_kind
           OR v_token IS DISTINCT FROM v_given_hash
           OR (v_payload IS DISTINCT FROM v_given
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

-- Functions are not PUBLIC's (0006_roles.sql): these are every role's that
-- enqueues or validates, as the functions they serve; new_token is for
-- producers.
REVOKE ALL ON FUNCTION seatq.token_hash(text), seatq.without_token(jsonb), seatq.new_token(),
    seatq.request_error(text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    seatq.token_hash(text),
    seatq.without_token(jsonb),
    seatq.new_token(),
    seatq.request_error(text, jsonb)
TO seatq_producer, seatq_worker, seatq_admin;
