package kd

import "testing"

func TestTolerates(t *testing.T) {
	taint := Taint{Key: "dedicated", Value: "batch", Effect: "NoSchedule"}
	for _, tc := range []struct {
		tol  Toleration
		want bool
	}{
		{Toleration{Operator: "Exists"}, true},
		{Toleration{Key: "dedicated", Operator: "Exists"}, true},
		{Toleration{Key: "other", Operator: "Exists"}, false},
		{Toleration{Key: "dedicated", Value: "batch"}, true},
		{Toleration{Key: "dedicated", Operator: "Equal", Value: "db"}, false},
		{Toleration{Key: "dedicated", Operator: "Exists", Effect: "NoExecute"}, false},
		{Toleration{Key: "dedicated", Operator: "Exists", Effect: "NoSchedule"}, true},
		{Toleration{Key: "dedicated", Operator: "Bogus"}, false},
	} {
		if got := tc.tol.Tolerates(taint); got != tc.want {
			t.Errorf("%+v: %v", tc.tol, got)
		}
	}
	num := Taint{Key: "n", Value: "5", Effect: "NoSchedule"}
	if !(Toleration{Key: "n", Operator: "Lt", Value: "7"}).Tolerates(num) ||
		(Toleration{Key: "n", Operator: "Gt", Value: "7"}).Tolerates(num) ||
		(Toleration{Key: "n", Operator: "Lt", Value: "07"}).Tolerates(num) ||
		(Toleration{Key: "n", Operator: "Lt", Value: "99999999999999999999"}).Tolerates(num) {
		t.Error("Lt/Gt")
	}
	if (Taint{Key: "k", Effect: "NoSchedule"}).String() != "k:NoSchedule" || taint.String() != "dedicated=batch:NoSchedule" {
		t.Error("String")
	}
}
