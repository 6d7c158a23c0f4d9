-- Input hardening.
--
-- seatq.enqueue takes the priority as an int, but the column is a smallint:
-- a priority out of range used to fail with a bare "smallint out of range".
-- It now says which argument and what range (same SQLSTATE, 22003).
--
-- Two inputs never reach seatq.request_error, because jsonb itself decides
-- them while parsing, before any trigger or function sees the payload; no
-- check here could change that, so seatq.request_error is unchanged:
--
-- * A string containing U+0000 (\u0000) is refused by jsonb: the INSERT or
--   the seatq.enqueue call fails with SQLSTATE 22P05 and nothing is stored.
--   The Rust client refuses such a payload first, as invalid_request naming
--   the field (producer/src/validate.rs).
-- * A number is stored by its value, not as written: 2E0 is stored as 2 and
--   1.5e1 as 15, so they are integers here. A fraction is kept (2.0 stays
--   2.0) and is wrong_type, as in Rust. A Rust producer parsing JSON text
--   reads any number written with an exponent as a float, so a bulk file
--   line with "party": 2E0 is wrong_type there; a payload built in Rust
--   never carries one (serde_json writes 2.0).

CREATE OR REPLACE FUNCTION seatq.enqueue(
    p_kind text,
    p_payload jsonb,
    p_idempotency_key text DEFAULT NULL,
    p_priority int DEFAULT 0,
    p_run_at timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767'
            USING ERRCODE = 'numeric_value_out_of_range', DETAIL = format('priority %s was given', p_priority);
    END IF;
    INSERT INTO seatq.requests (kind, payload, idempotency_key, priority, run_at)
    VALUES (p_kind, p_payload, p_idempotency_key, p_priority, p_run_at)
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        SELECT id INTO v_id FROM seatq.requests WHERE idempotency_key = p_idempotency_key;
    END IF;
    RETURN v_id;
END
$$;
