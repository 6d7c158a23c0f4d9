-- Validation in the database: producers that INSERT directly get the same
-- error codes as the Rust client. This mirrors core/src/validate.rs check for
-- check and in the same order; tests/validation.rs holds the two to the same
-- answers. Change both together.
--
-- Every request a producer inserts runs seatq.request_error in the
-- requests_validate trigger, so it is kept cheap: each embedded query in a
-- PL/pgSQL function costs an executor start, and the common, well-formed
-- request needs none. Unknown fields are found with the `-` operator (the
-- query naming the first one runs only when there is one), named seats are
-- read only when there are some, and the trigger calls the function as an
-- expression rather than through a query.

-- A JSON integer that fits in a bigint (written as an integer: no fraction,
-- no exponent). jsonb prints a number of scale 0 as digits only, never with
-- an exponent, so testing the scale gives the answer a regular expression on
-- the text would, for less.
CREATE FUNCTION seatq.is_json_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'number'
       AND scale(v::numeric) = 0
       AND v::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
$$;

-- ----------------------------------------------------- quoting input
--
-- A message quotes at most 64 characters of an offending input
-- (limits::MAX_QUOTED_CHARS), then says how long it was, so a huge kind,
-- field name or number never comes back whole; and it escapes control and
-- bidirectional formatting characters, so a hostile one cannot rearrange
-- what a reader sees. The same as core/src/validate.rs, character for
-- character.

-- The first control or bidirectional formatting character of p, as
-- 'U+XXXX'; NULL when there is none. The set (validate::is_control): C0,
-- DEL and C1, and the marks, embeddings, overrides and isolates that
-- reorder text. (E'' strings: the regular expression gets its backslashes
-- whatever standard_conforming_strings says.)
CREATE FUNCTION seatq.control_character(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'U+' || upper(lpad(to_hex(ascii(substring(p FROM
        E'[\\x01-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]'))), 4, '0'))
$$;

-- What follows an input cut to 64 characters: how long it was ('' when it
-- was not cut).
CREATE FUNCTION seatq.cut(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN char_length(p) > 64 THEN format('… (%s characters)', char_length(p)) ELSE '' END
$$;

-- p as a message shows text that needs no escaping (a number): its first
-- 64 characters, then how long it was.
CREATE FUNCTION seatq.bounded(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(p, 64) || seatq.cut(p)
$$;

-- p quoted as a message shows it (validate::quoted): in double quotes, its
-- first 64 characters with " and \ escaped by a backslash and control and
-- bidirectional formatting characters as \uXXXX, then how long it was.
-- Only ever called for a message, so a loop is fine.
CREATE FUNCTION seatq.quoted(p text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    c text;
    shown text := '';
BEGIN
    FOREACH c IN ARRAY regexp_split_to_array(left(p, 64), '') LOOP
        shown := shown || CASE
            WHEN c IN ('"', E'\\') THEN E'\\' || c
            WHEN seatq.control_character(c) IS NOT NULL THEN E'\\u' || lpad(to_hex(ascii(c)), 4, '0')
            ELSE c END;
    END LOOP;
    RETURN '"' || shown || '"' || seatq.cut(p);
END
$$;

-- A field name as a message shows it (validate::field_name): bare when it
-- is 1 to 64 ASCII letters, digits and underscores, else quoted (an empty
-- name as "").
CREATE FUNCTION seatq.field_name(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p ~ '^[A-Za-z0-9_]{1,64}$' THEN p ELSE seatq.quoted(p) END
$$;

-- How a JSON value is named in messages: its type, or a number's text
-- (bounded).
CREATE FUNCTION seatq.describe_json(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'number' THEN seatq.bounded(v::text) ELSE jsonb_typeof(v) END
$$;

-- How an array element is named in messages: a number or a string by its
-- value (bounded; a string quoted), anything else by what it is.
CREATE FUNCTION seatq.describe_element(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v)
        WHEN 'number' THEN seatq.bounded(v::text)
        WHEN 'string' THEN seatq.quoted(v #>> '{}')
        WHEN 'boolean' THEN v::text
        WHEN 'null' THEN 'null'
        WHEN 'array' THEN 'an array'
        ELSE 'an object' END
$$;

-- The message for number field p_field when its value p_value is outside
-- p_lo..p_hi; NULL when it is in range or absent (NULL). A single
-- expression, inlined into request_error's own.
CREATE FUNCTION seatq.range_error(p_field text, p_value numeric, p_lo numeric, p_hi numeric) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_value NOT BETWEEN p_lo AND p_hi
                THEN format('%s: %s is out of range %s to %s', p_field, p_value, p_lo, p_hi) END
$$;

-- The error code and message of a malformed request; NULLs when it is valid.
CREATE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    allowed text[];
    required text[];
    for_booking boolean := p_kind IN ('confirm', 'cancel', 'extend');
    f text;
    v jsonb;
    want text;
    ok boolean;
    seats numeric[];
    party numeric;
    num numeric;
    customer text;
    i int;
    bad jsonb;
BEGIN
    allowed := CASE p_kind
        WHEN 'hold' THEN ARRAY['event', 'class', 'party', 'customer', 'hold_seconds', 'seats', 'partial', 'together']
        WHEN 'book' THEN ARRAY['event', 'class', 'party', 'customer', 'seats', 'partial', 'together']
        WHEN 'confirm' THEN ARRAY['booking', 'customer']
        WHEN 'cancel' THEN ARRAY['booking', 'customer']
        WHEN 'extend' THEN ARRAY['booking', 'customer', 'hold_seconds']
    END;
    IF allowed IS NULL THEN
        code := 'unknown_kind';
        message := format('unknown request kind %s: expected hold, book, confirm, cancel or extend', seatq.quoted(p_kind));
        RETURN;
    END IF;
    IF octet_length(p_payload::text) > 8192 THEN
        code := 'payload_too_large';
        message := format('payload is %s bytes; the limit is 8192', octet_length(p_payload::text));
        RETURN;
    END IF;
    IF jsonb_typeof(p_payload) <> 'object' THEN
        code := 'wrong_type';
        message := format('payload: must be a JSON object, not %s', seatq.describe_json(p_payload));
        RETURN;
    END IF;
    IF p_payload - allowed <> '{}'::jsonb THEN
        SELECT min(k COLLATE "C") INTO f FROM jsonb_object_keys(p_payload) k WHERE k <> ALL (allowed);
        code := 'unknown_field';
        message := format('%s: unknown field for %s; expected one of %s', seatq.field_name(f), p_kind,
                          array_to_string(allowed, ', '));
        RETURN;
    END IF;
    required := CASE WHEN for_booking THEN ARRAY['booking', 'customer'] ELSE ARRAY['event', 'customer'] END;
    FOREACH f IN ARRAY required LOOP
        IF NOT p_payload ? f THEN
            code := 'missing_field';
            message := format('%s: missing', f);
            RETURN;
        END IF;
    END LOOP;
    FOREACH f IN ARRAY allowed LOOP
        v := p_payload -> f;
        CONTINUE WHEN v IS NULL;
        IF f = 'customer' THEN
            ok := jsonb_typeof(v) = 'string';
            want := 'a string';
        ELSIF f IN ('partial', 'together') THEN
            ok := jsonb_typeof(v) = 'boolean';
            want := 'true or false';
        ELSIF f = 'seats' THEN
            ok := jsonb_typeof(v) = 'array';
            want := 'an array of integers';
            IF ok THEN
                -- The first element that is not an integer, by its place.
                SELECT n - 1, e INTO i, bad FROM jsonb_array_elements(v) WITH ORDINALITY AS t(e, n)
                WHERE NOT seatq.is_json_int(e) ORDER BY n LIMIT 1;
                IF FOUND THEN
                    code := 'wrong_type';
                    message := format('seats[%s]: %s is not an integer', i, seatq.describe_element(bad));
                    RETURN;
                END IF;
            END IF;
        ELSE
            ok := seatq.is_json_int(v);
            want := 'an integer';
        END IF;
        IF NOT ok THEN
            code := 'wrong_type';
            message := format('%s: must be %s, not %s', f, want, seatq.describe_json(v));
            RETURN;
        END IF;
    END LOOP;

    -- hold and extend take hold_seconds; on any other kind it was an unknown field.
    message := seatq.range_error('hold_seconds', (p_payload ->> 'hold_seconds')::numeric, 1, 86400);
    IF message IS NOT NULL THEN code := 'hold_time_out_of_range'; RETURN; END IF;

    IF NOT for_booking THEN
        IF p_payload ? 'seats' THEN
            seats := ARRAY(SELECT e::text::numeric FROM jsonb_array_elements(p_payload -> 'seats') e);
        ELSE
            seats := '{}';
        END IF;
        IF cardinality(seats) > 9 THEN
            code := 'too_many_seats';
            message := format('seats: names %s seats; at most 9 may be named', cardinality(seats));
            RETURN;
        END IF;
        FOR i IN 2 .. cardinality(seats) LOOP
            IF seats[i] = ANY (seats[1:i - 1]) THEN
                code := 'duplicate_seat';
                message := format('seats: seat %s is named twice', seats[i]);
                RETURN;
            END IF;
        END LOOP;
        num := NULL;
        IF cardinality(seats) > 0 THEN
            SELECT s INTO num FROM unnest(seats) WITH ORDINALITY AS t(s, n)
            WHERE s NOT BETWEEN 1 AND 2147483647 ORDER BY n LIMIT 1;
        END IF;
        IF num IS NOT NULL THEN
            code := 'unknown_seat';
            message := format('seats: there is no seat %s', num);
            RETURN;
        END IF;
        party := (p_payload ->> 'party')::numeric;
        message := seatq.range_error('party', party, 1, 9);
        IF message IS NOT NULL THEN code := 'party_out_of_range'; RETURN; END IF;
        IF cardinality(seats) = 0 THEN
            IF party IS NULL THEN
                code := 'missing_field';
                message := 'party: missing (or name the seats)';
                RETURN;
            END IF;
            IF NOT p_payload ? 'class' THEN
                code := 'missing_field';
                message := 'class: missing (or name the seats)';
                RETURN;
            END IF;
        END IF;
        message := seatq.range_error('class', (p_payload ->> 'class')::numeric, 1, 32767);
        IF message IS NOT NULL THEN code := 'invalid_request'; RETURN; END IF;
    END IF;

    customer := p_payload ->> 'customer';
    IF btrim(customer, E' \t\n\r') = '' THEN
        code := 'invalid_request';
        message := 'customer: must not be empty';
        RETURN;
    ELSIF seatq.control_character(customer) IS NOT NULL THEN
        code := 'invalid_request';
        message := format('customer: must not contain a control or bidirectional formatting character (%s)',
                          seatq.control_character(customer));
        RETURN;
    ELSIF char_length(customer) > 200 THEN
        code := 'invalid_request';
        message := format('customer: %s characters; at most 200', char_length(customer));
        RETURN;
    END IF;

    IF NOT for_booking AND cardinality(seats) > 0 THEN
        IF party IS NOT NULL AND party <> cardinality(seats) THEN
            code := 'invalid_request';
            message := format('party: %s does not match the %s seats named', party, cardinality(seats));
            RETURN;
        END IF;
        FOREACH f IN ARRAY ARRAY['partial', 'together'] LOOP
            IF p_payload -> f = 'true'::jsonb THEN
                code := 'invalid_request';
                message := format('%s: cannot be combined with named seats', f);
                RETURN;
            END IF;
        END LOOP;
    END IF;
END
$$;

-- What is wrong with an idempotency key (validate::check_idempotency_key):
-- a control or bidirectional formatting character (invalid_request), or
-- more than 200 characters (idempotency_key_too_long,
-- limits::MAX_IDEMPOTENCY_KEY_CHARS: a key is an index entry, and an
-- entry over about 2.7 kB fails with an index error naming no field);
-- NULLs when it is fine, or absent.
CREATE FUNCTION seatq.idempotency_key_error(p_key text, OUT code text, OUT message text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN k.c IS NOT NULL THEN 'invalid_request'
                WHEN k.n > 200 THEN 'idempotency_key_too_long' END,
           CASE WHEN k.c IS NOT NULL
                THEN format('idempotency_key: must not contain a control or bidirectional formatting character (%s)', k.c)
                WHEN k.n > 200 THEN format('idempotency_key: %s characters; at most 200', k.n) END
    FROM (SELECT seatq.control_character(p_key) AS c, char_length(p_key) AS n) k
$$;

-- The message refusing run_at (code run_at_out_of_range), or NULL: it must
-- be a finite time (infinity would keep the request queued for ever,
-- -infinity put it before every other) at most 365 days from now
-- (limits::MAX_RUN_AT_DAYS). NULL is now. A single expression, inlined.
CREATE FUNCTION seatq.run_at_error(p_run_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN NOT isfinite(p_run_at) THEN format('run_at: must be a finite time, not %s', p_run_at)
                WHEN p_run_at > now() + interval '365 days' THEN 'run_at: must be at most 365 days from now' END
$$;

-- A malformed request is failed the moment it is inserted, with the same
-- code and message a worker would give it; nothing is rejected or lost, and
-- workers never see it. Its payload is kept unless it is over the size
-- limit: then the row keeps '{}' (the message says how large it was), so no
-- row holds a payload over the limit. A `run_at` out of range fails it too
-- (an infinite one is kept as now, the message saying what it was).
--
-- An idempotency key the row cannot keep (too long to index, or holding a
-- control character) refuses the insert outright, nothing stored, with
-- seatq's SQLSTATE SQ002 and a message starting with the code
-- (core/src/sqlstate.rs), as seatq.enqueue refuses a conflicting key.
CREATE FUNCTION seatq.fail_invalid_request() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
    v_code text;
    v_message text;
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
        e := seatq.request_error(NEW.kind, NEW.payload);
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
    RETURN NEW;
END
$$;

CREATE TRIGGER requests_validate BEFORE INSERT ON seatq.requests
    FOR EACH ROW EXECUTE FUNCTION seatq.fail_invalid_request();
