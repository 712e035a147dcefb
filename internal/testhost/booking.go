// Package testhost is a host of the External Agent Protocol written from
// the seed alone: a small movie-booking flow that joins /agent/ws as
// "host", publishes uiSpec, messageHistory and a stage-filtered
// toolSchema, and executes tool calls. Tests use it where the browser host
// would be.
package testhost

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Stages of the flow, in order.
var Stages = []string{"movie", "date", "showtime", "tickets", "seats", "confirm", "done"}

type item struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

var catalog = map[string][]item{
	"movie":    {{"m1", "Dune: Part Two"}, {"m2", "Inside Out 2"}, {"m3", "The Wild Robot"}},
	"date":     {{"d1", "Fri 14 Mar"}, {"d2", "Sat 15 Mar"}},
	"showtime": {{"t1", "14:30"}, {"t2", "19:45"}},
	"seats":    {{"A1", "A1"}, {"A2", "A2"}, {"A3", "A3"}, {"B1", "B1"}, {"B2", "B2"}},
}

const price = 12 // per ticket; backend data

// booking is the host's state: what a click would change.
type booking struct {
	stage    int
	selected map[string]string // stage -> item id
	seats    []string
	quantity int
	messages []map[string]string
	booked   bool
}

func newBooking() *booking {
	return &booking{selected: map[string]string{}, seats: []string{}, messages: []map[string]string{}}
}

func (b *booking) stageName() string { return Stages[b.stage] }

// tools allowed in the current stage.
func (b *booking) allowed() []string {
	switch b.stageName() {
	case "movie":
		return []string{"select", "next", "postMessage"}
	case "tickets":
		return []string{"setQuantity", "next", "prev", "postMessage"}
	case "confirm":
		return []string{"next", "prev", "postMessage"}
	case "done":
		return []string{"postMessage"}
	}
	return []string{"select", "next", "prev", "postMessage"}
}

var toolDefs = map[string]map[string]any{
	"select": {"name": "select", "description": "Select an item (movie, date, showtime or seat) by its id.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"itemId": map[string]any{"type": "string", "description": "The id of a visible item."}}, "required": []string{"itemId"}}},
	"setQuantity": {"name": "setQuantity", "description": "Set the number of tickets.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{
			"quantity": map[string]any{"type": "integer", "minimum": 0, "maximum": 10}}, "required": []string{"quantity"}}},
	"next":        {"name": "next", "description": "Go to the next step.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}},
	"prev":        {"name": "prev", "description": "Go back one step.", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}},
	"postMessage": {"name": "postMessage", "description": "Post a message to the participant's chat.", "parameters": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}},
}

func (b *booking) toolSchema() []map[string]any {
	var out []map[string]any
	for _, n := range b.allowed() {
		out = append(out, toolDefs[n])
	}
	return out
}

func (b *booking) uiSpec() map[string]any {
	st := b.stageName()
	var items []map[string]any
	for _, it := range catalog[st] {
		sel := b.selected[st] == it.ID || (st == "seats" && slices.Contains(b.seats, it.ID))
		items = append(items, map[string]any{"id": it.ID, "label": it.Label, "selected": sel})
	}
	return map[string]any{
		"stage":      st,
		"items":      items,
		"selections": map[string]any{"movie": b.selected["movie"], "date": b.selected["date"], "showtime": b.selected["showtime"], "seats": b.seats},
		"quantity":   b.quantity,
		"total":      b.quantity * price,
		"booked":     b.booked,
		// What must never leave the host: the relay has to strip it.
		"backendData": map[string]any{"seatMap": "secret-seat-map", "prices": map[string]int{"adult": price}},
	}
}

// toolError is a refused call, with the seed's code.
type toolError struct{ code, msg string }

// apply executes a tool as a click would. It reports whether the result
// should carry the new uiSpec (select and setQuantity do; next, prev and
// postMessage confirm with ok alone, as the seed allows).
func (b *booking) apply(name string, params json.RawMessage) (withSpec bool, err *toolError) {
	if _, known := toolDefs[name]; !known {
		return false, &toolError{"UNKNOWN_TOOL", fmt.Sprintf("no tool %q", name)}
	}
	if !slices.Contains(b.allowed(), name) {
		return false, &toolError{"UNKNOWN_TOOL", fmt.Sprintf("%s is not available in stage %s; allowed now: %s", name, b.stageName(), strings.Join(b.allowed(), ", "))}
	}
	var p struct {
		ItemID   string          `json:"itemId"`
		Quantity json.RawMessage `json:"quantity"`
		Text     string          `json:"text"`
	}
	if len(params) > 0 {
		if json.Unmarshal(params, &p) != nil {
			return false, &toolError{"INVALID_PARAMS", "params do not match the tool's schema"}
		}
	}
	st := b.stageName()
	switch name {
	case "select":
		ok := slices.ContainsFunc(catalog[st], func(it item) bool { return it.ID == p.ItemID })
		if !ok {
			return false, &toolError{"INVALID_PARAMS", fmt.Sprintf("no item %q in stage %s", p.ItemID, st)}
		}
		if st == "seats" {
			if i := slices.Index(b.seats, p.ItemID); i >= 0 {
				b.seats = slices.Delete(b.seats, i, i+1)
			} else {
				if len(b.seats) >= b.quantity {
					return false, &toolError{"TOOL_EXECUTION_FAILED", fmt.Sprintf("already %d seats selected for %d tickets", len(b.seats), b.quantity)}
				}
				b.seats = append(b.seats, p.ItemID)
			}
		} else {
			b.selected[st] = p.ItemID
		}
		return true, nil
	case "setQuantity":
		var q float64
		if json.Unmarshal(p.Quantity, &q) != nil || q != float64(int(q)) || q < 0 || q > 10 {
			return false, &toolError{"INVALID_PARAMS", "setQuantity requires an integer quantity between 0 and 10"}
		}
		b.quantity = int(q)
		return true, nil
	case "next":
		switch {
		case (st == "movie" || st == "date" || st == "showtime") && b.selected[st] == "":
			return false, &toolError{"TOOL_EXECUTION_FAILED", "select a " + st + " first"}
		case st == "tickets" && b.quantity == 0:
			return false, &toolError{"TOOL_EXECUTION_FAILED", "set the number of tickets first"}
		case st == "seats" && len(b.seats) != b.quantity:
			return false, &toolError{"TOOL_EXECUTION_FAILED", fmt.Sprintf("select %d seats first", b.quantity)}
		case st == "confirm":
			b.booked = true
		}
		b.stage++
		return false, nil
	case "prev":
		if b.stage > 0 {
			b.stage--
		}
		return false, nil
	case "postMessage":
		if strings.TrimSpace(p.Text) == "" {
			return false, &toolError{"INVALID_PARAMS", "postMessage requires text"}
		}
		b.messages = append(b.messages, map[string]string{"role": "agent", "text": p.Text})
		return false, nil
	}
	return false, nil
}
