package cluster

const shortFlow = `{"id":"short","start":"a","nodes":[
	{"id":"a","type":"set","params":{"vars":{"x":"1"}},"next":"b"},
	{"id":"b","type":"set","params":{"vars":{"y":"{{ VARS.x }}2"}},"next":"done"},
	{"id":"done","type":"end","params":{"output":"{{ VARS.y }}"}}]}`
