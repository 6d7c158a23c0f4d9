//! Where a row version is: PostgreSQL's `tid` (the `ctid` system column), as
//! sqlx does not bind or read one.
//!
//! The batch reads each seat's `ctid` as it locks the seat and takes the seat
//! by it ([`crate::sql::allocation::TAKE_SEATS`]): a fetch of that one heap
//! tuple instead of a second descent of `seats_pkey` per seat. The lock is
//! what makes that safe: a row this transaction has locked cannot be updated
//! or moved by another until it commits, so the version it locked stays at
//! that address.

use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

/// A row version's address: heap block and line pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tid {
    block: u32,
    offset: u16,
}

/// `tid` and `tid[]` in pg_type (fixed: built-in types).
const TID: Oid = Oid(27);
const TID_ARRAY: Oid = Oid(1010);

impl Type<Postgres> for Tid {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(TID)
    }
}

impl PgHasArrayType for Tid {
    fn array_type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(TID_ARRAY)
    }
}

/// The binary form (tidsend): the block, then the line pointer, big-endian.
impl Encode<'_, Postgres> for Tid {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(&self.block.to_be_bytes());
        buf.extend_from_slice(&self.offset.to_be_bytes());
        Ok(IsNull::No)
    }
}

impl Decode<'_, Postgres> for Tid {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        // Prepared statements' results come in binary (tidsend).
        if value.format() != PgValueFormat::Binary {
            return Err("a tid in text form".into());
        }
        match *value.as_bytes()? {
            [b0, b1, b2, b3, o0, o1] => {
                Ok(Tid { block: u32::from_be_bytes([b0, b1, b2, b3]), offset: u16::from_be_bytes([o0, o1]) })
            }
            ref other => Err(format!("a tid is 6 bytes, not {}", other.len()).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_tidsend_does() {
        let mut buf = PgArgumentBuffer::default();
        let tid = Tid { block: 0x0102_0304, offset: 0x0506 };
        assert!(matches!(Encode::<Postgres>::encode_by_ref(&tid, &mut buf), Ok(IsNull::No)));
        assert_eq!(&buf[..], &[1, 2, 3, 4, 5, 6]);
    }
}
