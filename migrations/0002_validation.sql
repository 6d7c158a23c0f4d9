-- Validation in the database: producers that INSERT directly get the same
-- error codes as the Rust client. This mirrors producer/src/validate.rs check
-- for check and in the same order; tests/validation.rs holds the two to the
-- same answers. Change both together.

-- A JSON integer that fits in a bigint (written as an integer: no fraction,
-- no exponent).
CREATE FUNCTION seatq.is_json_int(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_typeof(v) = 'number'
       AND v::text ~ '^-?[0-9]+$'
       AND v::text::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
$$;

-- How a JSON value is named in messages: its type, or a number's text.
CREATE FUNCTION seatq.describe_json(v jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'number' THEN v::text ELSE jsonb_typeof(v) END
$$;

-- The error code and message of a malformed request; NULLs when it is valid.
CREATE FUNCTION seatq.request_error(p_kind text, p_payload jsonb, OUT code text, OUT message text)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    allowed text[];
    required text[];
    for_booking boolean := p_kind IN ('confirm', 'cancel');
    f text;
    v jsonb;
    want text;
    ok boolean;
    seats numeric[];
    party numeric;
    num numeric;
    customer text;
    i int;
BEGIN
    allowed := CASE p_kind
        WHEN 'hold' THEN ARRAY['event', 'class', 'party', 'customer', 'hold_seconds', 'seats', 'partial', 'together']
        WHEN 'book' THEN ARRAY['event', 'class', 'party', 'customer', 'seats', 'partial', 'together']
        WHEN 'confirm' THEN ARRAY['booking', 'customer']
        WHEN 'cancel' THEN ARRAY['booking', 'customer']
    END;
    IF allowed IS NULL THEN
        code := 'unknown_kind';
        message := format('unknown request kind "%s": expected hold, book, confirm or cancel', p_kind);
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
    SELECT min(k COLLATE "C") INTO f FROM jsonb_object_keys(p_payload) k WHERE k <> ALL (allowed);
    IF f IS NOT NULL THEN
        code := 'unknown_field';
        message := format('%s: unknown field for %s; expected one of %s', f, p_kind, array_to_string(allowed, ', '));
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
            ok := jsonb_typeof(v) = 'array'
                  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(v) e WHERE NOT seatq.is_json_int(e));
            want := 'an array of integers';
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

    IF NOT for_booking THEN
        num := (p_payload ->> 'hold_seconds')::numeric;
        IF num IS NOT NULL AND num NOT BETWEEN 1 AND 86400 THEN
            code := 'hold_time_out_of_range';
            message := format('hold_seconds: %s is out of range 1 to 86400', num);
            RETURN;
        END IF;
        seats := ARRAY(SELECT e::text::numeric FROM jsonb_array_elements(coalesce(p_payload -> 'seats', '[]')) e);
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
        SELECT s INTO num FROM unnest(seats) WITH ORDINALITY AS t(s, n)
        WHERE s NOT BETWEEN 1 AND 2147483647 ORDER BY n LIMIT 1;
        IF num IS NOT NULL THEN
            code := 'unknown_seat';
            message := format('seats: there is no seat %s', num);
            RETURN;
        END IF;
        party := (p_payload ->> 'party')::numeric;
        IF party IS NOT NULL AND party NOT BETWEEN 1 AND 9 THEN
            code := 'party_out_of_range';
            message := format('party: %s is out of range 1 to 9', party);
            RETURN;
        END IF;
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
        num := (p_payload ->> 'class')::numeric;
        IF num IS NOT NULL AND num NOT BETWEEN 1 AND 32767 THEN
            code := 'invalid_request';
            message := format('class: %s is out of range 1 to 32767', num);
            RETURN;
        END IF;
    END IF;

    customer := p_payload ->> 'customer';
    IF btrim(customer, E' \t\n\r') = '' THEN
        code := 'invalid_request';
        message := 'customer: must not be empty';
        RETURN;
    END IF;
    IF char_length(customer) > 200 THEN
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

-- A malformed request is failed the moment it is inserted, with the same
-- code and message a worker would give it; nothing is rejected or lost, and
-- workers never see it.
CREATE FUNCTION seatq.fail_invalid_request() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    e record;
BEGIN
    IF NEW.status = 'queued' THEN
        SELECT * INTO e FROM seatq.request_error(NEW.kind, NEW.payload);
        IF e.code IS NOT NULL THEN
            NEW.status := 'failed';
            NEW.result := NULL;
            NEW.error_code := e.code;
            NEW.error_message := e.message;
            NEW.finished_at := now();
            PERFORM pg_notify('seatq_done', NEW.id::text);
        END IF;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER requests_validate BEFORE INSERT ON seatq.requests
    FOR EACH ROW EXECUTE FUNCTION seatq.fail_invalid_request();
