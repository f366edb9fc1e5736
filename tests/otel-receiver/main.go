// A minimal OTLP/gRPC trace receiver for the tracing tests of `kube-descheduler run`: it serves
// the OpenTelemetry TraceService (the official generated protobuf service of
// go.opentelemetry.io/proto/otlp) on -listen, with TLS when -cert/-key are given, and writes
// every span it receives as one JSON line to stdout. The first line is "listening <addr>".
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // the Collector's OTLP exporter compresses with gzip
)

type span struct {
	Name       string            `json:"name"`
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentSpanId"`
	Scope      string            `json:"scope"`
	Attributes map[string]string `json:"attributes"`
	Resource   map[string]string `json:"resource"`
	Events     []string          `json:"events"`
}

type receiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu  sync.Mutex
	enc *json.Encoder
}

func attrs(kvs []*common.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[kv.GetKey()] = v.GetStringValue()
		default:
			out[kv.GetKey()] = fmt.Sprint(v.GetValue())
		}
	}
	return out
}

func (r *receiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				var events []string
				for _, e := range s.GetEvents() {
					events = append(events, e.GetName())
				}
				_ = r.enc.Encode(span{
					Name:       s.GetName(),
					TraceID:    hex.EncodeToString(s.GetTraceId()),
					SpanID:     hex.EncodeToString(s.GetSpanId()),
					ParentID:   hex.EncodeToString(s.GetParentSpanId()),
					Scope:      ss.GetScope().GetName(),
					Attributes: attrs(s.GetAttributes()),
					Resource:   res,
					Events:     events,
				})
			}
		}
	}
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address")
	cert := flag.String("cert", "", "TLS certificate (PEM)")
	key := flag.String("key", "", "TLS key (PEM)")
	flag.Parse()
	var opts []grpc.ServerOption
	if *cert != "" {
		creds, err := credentials.NewServerTLSFromFile(*cert, *key)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer(opts...)
	coltrace.RegisterTraceServiceServer(s, &receiver{enc: json.NewEncoder(os.Stdout)})
	fmt.Printf("listening %s\n", lis.Addr())
	_ = os.Stdout.Sync()
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
