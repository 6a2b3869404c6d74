// Package pgmerge reads the answers of a merged statement: one statement
// that writes the items of many callers (a group commit's steps of one
// kind) and returns a row per item it wrote, tagged with the item's place
// in its arrays (ord, from 1), and gives each caller its own answer.
package pgmerge

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Answer reads rows, each scanned by scan into its item's place (ord, from
// 1) and value, and calls fns[i] once with item i's value, or with
// pgx.ErrNoRows when no row named it (its compare-and-set matched
// nothing). When the statement fails, or a row names a place out of range
// or twice, every fns[i] gets the zero value and the error, which Answer
// returns: a merged statement that failed wrote none of its items.
func Answer[T any](rows pgx.Rows, fns []func(T, error), scan func(pgx.Rows) (int32, T, error)) error {
	got := make([]T, len(fns))
	seen := make([]bool, len(fns))
	for rows.Next() {
		ord, v, err := scan(rows)
		if err == nil && (ord < 1 || int(ord) > len(fns) || seen[ord-1]) {
			err = fmt.Errorf("a merged statement of %d items answered item %d twice or out of range", len(fns), ord)
		}
		if err != nil {
			rows.Close()
			return all(fns, err)
		}
		got[ord-1], seen[ord-1] = v, true
	}
	if err := rows.Err(); err != nil {
		return all(fns, err)
	}
	var zero T
	for i, fn := range fns {
		if seen[i] {
			fn(got[i], nil)
		} else {
			fn(zero, pgx.ErrNoRows)
		}
	}
	return nil
}

// all gives every fns the zero value and err, and returns err.
func all[T any](fns []func(T, error), err error) error {
	var zero T
	for _, fn := range fns {
		fn(zero, err)
	}
	return err
}
