-- The per-customer count's index holds only the bookings it counts.
--
-- bookings_by_customer (0003_inventory.sql) serves one question: how many
-- live seats a customer has on an event with a per-customer limit
-- (seatq.customer_seats). Most events have no limit, yet every booking paid
-- for an entry in it, with text keys, in the batch transaction that makes
-- it. A booking now says whether it counts toward its event's limit
-- (`limited`), and only those are in the index.
--
-- `limited` is written by the worker from the event's rules as the batch
-- read them, in the same transaction that checked the limit. An event given
-- a limit later (an admin's UPDATE of per_customer) has its bookings marked
-- by the trigger below, so that they count from then on. A batch that read
-- the event before that UPDATE committed books without the limit, as it
-- would have without this column: a limit applies to batches that start
-- after it is set.

ALTER TABLE seatq.bookings ADD COLUMN limited boolean NOT NULL DEFAULT false;

UPDATE seatq.bookings b SET limited = true
FROM seatq.events e
WHERE e.id = b.event_id AND e.per_customer IS NOT NULL;

DROP INDEX seatq.bookings_by_customer;
CREATE INDEX bookings_by_customer ON seatq.bookings (event_id, producer, customer) WHERE limited;

-- Only bookings that count; a seek on the partial index above (the
-- condition matches its predicate). VOLATILE for the reason given in
-- 0003_inventory.sql.
CREATE OR REPLACE FUNCTION seatq.customer_seats(p_event bigint, p_producer text, p_customer text) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT coalesce(sum(cardinality(b.seats)), 0)::bigint FROM seatq.bookings b
    WHERE b.event_id = p_event AND b.producer = p_producer AND b.customer = p_customer
      AND b.limited
      AND seatq.is_live(b.state, b.held_until)
$$;

-- An event that gets a limit: its bookings count toward it from now on.
CREATE FUNCTION seatq.count_toward_new_limit() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE seatq.bookings SET limited = true WHERE event_id = NEW.id AND NOT limited;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_limit_added AFTER UPDATE OF per_customer ON seatq.events
    FOR EACH ROW WHEN (OLD.per_customer IS NULL AND NEW.per_customer IS NOT NULL)
    EXECUTE FUNCTION seatq.count_toward_new_limit();
REVOKE ALL ON FUNCTION seatq.count_toward_new_limit() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION seatq.count_toward_new_limit() TO seatq_admin;
