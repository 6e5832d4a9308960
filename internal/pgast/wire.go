package pgast

import (
	"encoding/binary"
	"errors"
	"math"
)

// The protobuf wire format, as far as pg_query.proto uses it: varints,
// 64-bit doubles, length-delimited strings and messages, and packed
// repeated uint64. Decoding follows protobuf's rules where they matter to
// a parse tree: fields in any order, a repeated field's elements in the
// order they come, an unknown field or one of an unexpected wire type
// skipped, a message field seen twice merged.

const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

var errTruncated = errors.New("pgast: the parse tree's protobuf is cut short or malformed")

func readVarint(b *[]byte) (uint64, error) {
	v, n := binary.Uvarint(*b)
	if n <= 0 {
		return 0, errTruncated
	}
	*b = (*b)[n:]
	return v, nil
}

func readTag(b *[]byte) (num, wt int, err error) {
	v, err := readVarint(b)
	if err != nil {
		return 0, 0, err
	}
	if v>>3 == 0 || v>>3 > math.MaxInt32 {
		return 0, 0, errTruncated
	}
	return int(v >> 3), int(v & 7), nil
}

// readLen reads a length-delimited field's bytes.
func readLen(b *[]byte) ([]byte, error) {
	n, err := readVarint(b)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(*b)) {
		return nil, errTruncated
	}
	v := (*b)[:n:n]
	*b = (*b)[n:]
	return v, nil
}

// skip passes over a field the tree does not hold, or one sent with a
// wire type its field does not have.
func skip(b *[]byte, wt int) error {
	switch wt {
	case wireVarint:
		_, err := readVarint(b)
		return err
	case wireFixed64, wireFixed32:
		n := 8
		if wt == wireFixed32 {
			n = 4
		}
		if len(*b) < n {
			return errTruncated
		}
		*b = (*b)[n:]
		return nil
	case wireBytes:
		_, err := readLen(b)
		return err
	}
	// Groups (3, 4) are proto2's and pg_query.proto has none.
	return errTruncated
}

func readUint(b *[]byte, wt int, set func(uint64)) error {
	if wt != wireVarint {
		return skip(b, wt)
	}
	v, err := readVarint(b)
	if err == nil {
		set(v)
	}
	return err
}

func readBool(b *[]byte, wt int, dst *bool) error {
	return readUint(b, wt, func(v uint64) { *dst = v != 0 })
}

func readInt32(b *[]byte, wt int, dst *int32) error {
	return readUint(b, wt, func(v uint64) { *dst = int32(v) })
}

func readUint32(b *[]byte, wt int, dst *uint32) error {
	return readUint(b, wt, func(v uint64) { *dst = uint32(v) })
}

func readInt64(b *[]byte, wt int, dst *int64) error {
	return readUint(b, wt, func(v uint64) { *dst = int64(v) })
}

func readUint64(b *[]byte, wt int, dst *uint64) error {
	return readUint(b, wt, func(v uint64) { *dst = v })
}

func readEnum[E ~int32](b *[]byte, wt int, dst *E) error {
	return readUint(b, wt, func(v uint64) { *dst = E(int32(v)) })
}

func readDouble(b *[]byte, wt int, dst *float64) error {
	if wt != wireFixed64 {
		return skip(b, wt)
	}
	if len(*b) < 8 {
		return errTruncated
	}
	*dst = math.Float64frombits(binary.LittleEndian.Uint64(*b))
	*b = (*b)[8:]
	return nil
}

func readString(b *[]byte, wt int, dst *string) error {
	if wt != wireBytes {
		return skip(b, wt)
	}
	v, err := readLen(b)
	if err == nil {
		*dst = string(v)
	}
	return err
}

func readStrings(b *[]byte, wt int, dst *[]string) error {
	if wt != wireBytes {
		return skip(b, wt)
	}
	var s string
	err := readString(b, wt, &s)
	if err == nil {
		*dst = append(*dst, s)
	}
	return err
}

// readUint64s takes both encodings of a repeated uint64: packed in one
// length-delimited field (proto3's default), or one varint per element.
func readUint64s(b *[]byte, wt int, dst *[]uint64) error {
	if wt == wireVarint {
		return readUint(b, wt, func(v uint64) { *dst = append(*dst, v) })
	}
	if wt != wireBytes {
		return skip(b, wt)
	}
	packed, err := readLen(b)
	for err == nil && len(packed) > 0 {
		var v uint64
		if v, err = readVarint(&packed); err == nil {
			*dst = append(*dst, v)
		}
	}
	return err
}

// msgPtr is a pointer to a generated message.
type msgPtr[T any] interface {
	*T
	node
}

func readMsg[T any, P msgPtr[T]](b *[]byte, wt int, dst *P) error {
	if wt != wireBytes {
		return skip(b, wt)
	}
	v, err := readLen(b)
	if err != nil {
		return err
	}
	if *dst == nil {
		*dst = P(new(T))
	}
	return (*dst).unmarshal(v)
}

func readMsgs[T any, P msgPtr[T]](b *[]byte, wt int, dst *[]P) error {
	var m P
	if err := readMsg(b, wt, &m); err != nil || m == nil {
		return err
	}
	*dst = append(*dst, m)
	return nil
}

func appendTag(b []byte, num, wt int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wt))
}

// proto3 writes a scalar only when it is not its zero value.
func appendUint(b []byte, num int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, num, wireVarint), v)
}

func appendBool(b []byte, num int, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, num, 1)
}

// A negative int32 or enum goes on the wire as its 64-bit two's
// complement (ten bytes), as protobuf defines it.
func appendInt32(b []byte, num int, v int32) []byte   { return appendUint(b, num, uint64(int64(v))) }
func appendUint32(b []byte, num int, v uint32) []byte { return appendUint(b, num, uint64(v)) }
func appendInt64(b []byte, num int, v int64) []byte   { return appendUint(b, num, uint64(v)) }
func appendUint64(b []byte, num int, v uint64) []byte { return appendUint(b, num, v) }
func appendEnum[E ~int32](b []byte, num int, v E) []byte {
	return appendUint(b, num, uint64(int64(v)))
}

func appendDouble(b []byte, num int, v float64) []byte {
	bits := math.Float64bits(v)
	if bits == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(appendTag(b, num, wireFixed64), bits)
}

func appendBytes(b []byte, num int, v []byte) []byte {
	b = appendTag(b, num, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, num int, v string) []byte {
	if v == "" {
		return b
	}
	b = appendTag(b, num, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendStrings writes every element, empty ones included: a list's
// length is its content.
func appendStrings(b []byte, num int, v []string) []byte {
	for _, s := range v {
		b = appendTag(b, num, wireBytes)
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func appendUint64s(b []byte, num int, v []uint64) []byte {
	if len(v) == 0 {
		return b
	}
	var packed []byte
	for _, x := range v {
		packed = binary.AppendUvarint(packed, x)
	}
	return appendBytes(b, num, packed)
}

func appendMsg[P interface {
	comparable
	node
}](b []byte, num int, v P) []byte {
	var none P
	if v == none {
		return b
	}
	return appendBytes(b, num, v.marshal(nil))
}

func appendMsgs[P interface {
	comparable
	node
}](b []byte, num int, v []P) []byte {
	for _, m := range v {
		b = appendBytes(b, num, m.marshal(nil))
	}
	return b
}

// appendOneof writes a oneof's member even when it is empty: that it is
// set is what it says.
func appendOneof[P node](b []byte, num int, v P) []byte {
	return appendBytes(b, num, v.marshal(nil))
}

func visitOne[P comparable](v P, fn func(Message) bool) bool {
	var none P
	return v == none || fn(v)
}

func visitList[P comparable](l []P, fn func(Message) bool) bool {
	var none P
	for _, v := range l {
		if v != none && !fn(v) {
			return false
		}
	}
	return true
}

func cloneList[P interface{ Clone() P }](l []P) []P {
	if l == nil {
		return nil
	}
	c := make([]P, len(l))
	for i, v := range l {
		c[i] = v.Clone()
	}
	return c
}

func cloneSlice[T any](l []T) []T {
	if l == nil {
		return nil
	}
	return append(make([]T, 0, len(l)), l...)
}
