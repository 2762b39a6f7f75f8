package sqs

import "encoding/xml"

// attrMap is a string map that the query protocol flattens into repeated
// <X><Name>k</Name><Value>v</Value></X> elements (queue and message system
// attributes).
type attrMap map[string]string

func (m attrMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return marshalPairs(e, start, m, "Name")
}

// tagMap is a string map flattened as <Tag><Key>k</Key><Value>v</Value></Tag>.
type tagMap map[string]string

func (m tagMap) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return marshalPairs(e, start, m, "Key")
}

// marshalPairs writes one start element per entry, sorted by key, each with
// a key element and a <Value>.
func marshalPairs(e *xml.Encoder, start xml.StartElement, m map[string]string, keyName string) error {
	key := xml.StartElement{Name: xml.Name{Local: keyName}}
	val := xml.StartElement{Name: xml.Name{Local: "Value"}}
	for _, k := range sortedKeys(m) {
		if err := e.EncodeToken(start); err != nil {
			return err
		}
		if err := e.EncodeElement(k, key); err != nil {
			return err
		}
		if err := e.EncodeElement(m[k], val); err != nil {
			return err
		}
		if err := e.EncodeToken(start.End()); err != nil {
			return err
		}
	}
	return nil
}
