"""moto's server, made able to deploy the Outrigger stack (local/aws-emulator.ts starts it; the rehearsal in
docs/getting-started/deploy.md#rehearse-the-deploy-on-an-emulator).

    python moto_server.py -H 127.0.0.1 -p 5055      moto's server, with what follows added
    python moto_server.py --unsupported T.json      the resource types of template T that moto itself does not
                                                    create, one a line, each with moto's own words for it

moto's CloudFormation skips a resource type it has no model for (with a warning), and the stack then fails at the
first reference to it. Before the server starts, this registers a model for each type of the stack moto lacks:
a table, secret, alarm or function URL created in moto's own backends, so that the tests read them back through
the APIs, and an accepted placeholder for the policies and EKS resources, which moto has nothing to put behind.
It also mends four places where moto's CloudFormation answers the CDK CLI's deploy otherwise than AWS's does.
"""

import json
import secrets
import sys
import warnings

from moto.core.common_models import CloudFormationModel

# moto files each model under the service named by its module path's second part, so a model defined here
# needs a module path of that form.
MODULE = "moto.outrigger_emulator"

# The types that get a placeholder: accepted, with made-up ids, and nothing created behind them.
PLACEHOLDER_TYPES = [
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::TopicPolicy",
    "AWS::EKS::AccessEntry",
    "AWS::EKS::PodIdentityAssociation",
    "AWS::S3::BucketPolicy",
]


class Emulated:
    """A resource created for moto's CloudFormation: its physical id, its attributes, and how it is deleted."""

    def __init__(self, physical_id, attributes=None, on_delete=None):
        self.physical_resource_id = physical_id
        self._attributes = attributes or {}
        self._on_delete = on_delete

    @classmethod
    def has_cfn_attr(cls, attr):
        return True

    def get_cfn_attribute(self, name):
        return self._attributes.get(name, f"{self.physical_resource_id}|{name}")

    def delete(self, account_id, region_name):
        if self._on_delete:
            self._on_delete()

    @classmethod
    def update_from_cloudformation_json(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name):
        # Replaced, as CloudFormation replaces a resource: the new one (under the name moto generates anew) first,
        # then the old one deleted, unless the create has just overwritten it under the same name. A table's items
        # do not move to the new table; the deploy rehearsal never modifies one.
        created = cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)
        if created.physical_resource_id != original_resource.physical_resource_id:
            original_resource.delete(account_id, region_name)
        return created


# The models to register: (type, name property, the class whose `create` makes one from its properties).
MODELS = []


def model(cfn_type, name_property=""):
    """Records the decorated class's `create(name, properties, account, region)` as the model of `cfn_type`."""

    def record(cls):
        MODELS.append((cfn_type, name_property, cls))
        return cls

    return record


def register_models():
    """Makes moto's CloudFormation create every type of MODELS (its lookup table is built on first use, later)."""
    for cfn_type, name_property, cls in MODELS:

        def create(_, name, template, account, region, _cls=cls, **kwargs):
            return _cls.create(name, template["Properties"], account, region)

        # moto finds its models as CloudFormationModel's direct subclasses.
        type(
            cls.__name__,
            (Emulated, CloudFormationModel),
            {
                "__module__": MODULE,
                "__doc__": cls.__doc__,
                "cloudformation_type": staticmethod(lambda t=cfn_type: t),
                "cloudformation_name_type": staticmethod(lambda n=name_property: n),
                "create_from_cloudformation_json": classmethod(create),
            },
        )


class Placeholder:
    """Accepted, with a made-up id: nothing is created behind it."""

    @staticmethod
    def create(name, props, account, region):
        return Emulated(name)


for t in PLACEHOLDER_TYPES:
    model(t)(type(t.replace("::", ""), (Placeholder,), {"__doc__": Placeholder.__doc__}))


@model("AWS::DynamoDB::GlobalTable", "TableName")
class GlobalTable:
    """The table in the stack's region, with its keys, billing mode, streams and TTL; no other replica."""

    @staticmethod
    def create(name, props, account, region):
        from moto.dynamodb.models import dynamodb_backends

        backend = dynamodb_backends[account][region]
        billing = "PAY_PER_REQUEST" if props.get("BillingMode") == "PAY_PER_REQUEST" else "PROVISIONED"
        table = backend.create_table(
            name=name,
            schema=props["KeySchema"],
            attr=props["AttributeDefinitions"],
            global_indexes=props.get("GlobalSecondaryIndexes", []),
            indexes=props.get("LocalSecondaryIndexes", []),
            throughput=None,
            billing_mode=billing,
            streams=props.get("StreamSpecification"),
            tags=None,
            sse_specification=None,
            deletion_protection_enabled=False,
            warm_throughput=None,
        )
        if props.get("TimeToLiveSpecification"):
            backend.update_time_to_live(name, props["TimeToLiveSpecification"])
        return Emulated(name, {"Arn": table.table_arn, "TableId": name}, lambda: backend.delete_table(name))


@model("AWS::SecretsManager::Secret", "Name")
class Secret:
    """A secret with the template's string, or a generated one (GenerateSecretString's settings are not followed)."""

    @staticmethod
    def create(name, props, account, region):
        from moto.secretsmanager.models import secretsmanager_backends

        backend = secretsmanager_backends[account][region]
        backend.create_secret(
            name=name,
            secret_string=props.get("SecretString") or secrets.token_hex(32),
            secret_binary=None,
            description=props.get("Description"),
            tags=props.get("Tags"),
            kms_key_id=props.get("KmsKeyId"),
            client_request_token=None,
            replica_regions=[],
            force_overwrite=False,
        )
        arn = backend.secrets[name].arn
        return Emulated(arn, {"Id": arn}, lambda: backend.delete_secret(secret_id=arn, recovery_window_in_days=None, force_delete_without_recovery=True))


@model("AWS::CloudWatch::Alarm", "AlarmName")
class Alarm:
    """An alarm with the template's metric (or metric math, as expressions only), threshold and actions."""

    @staticmethod
    def create(name, props, account, region):
        from moto.cloudwatch.models import MetricDataQuery, cloudwatch_backends

        backend = cloudwatch_backends[account][region]
        queries = [
            MetricDataQuery(
                query_id=m.get("Id"),
                label=m.get("Label"),
                period=m.get("Period"),
                return_data=m.get("ReturnData"),
                expression=m.get("Expression"),
                metric_stat=None,
            )
            for m in props.get("Metrics", [])
        ]
        alarm = backend.put_metric_alarm(
            name=name,
            namespace=props.get("Namespace"),
            metric_name=props.get("MetricName"),
            comparison_operator=props["ComparisonOperator"],
            evaluation_periods=int(props["EvaluationPeriods"]),
            period=props.get("Period"),
            threshold=props.get("Threshold"),
            statistic=props.get("Statistic"),
            description=props.get("AlarmDescription"),
            dimensions=props.get("Dimensions", []),
            alarm_actions=props.get("AlarmActions", []),
            metric_data_queries=queries or None,
            datapoints_to_alarm=props.get("DatapointsToAlarm"),
            extended_statistic=props.get("ExtendedStatistic"),
            ok_actions=props.get("OKActions"),
            insufficient_data_actions=props.get("InsufficientDataActions"),
            unit=props.get("Unit"),
            treat_missing_data=props.get("TreatMissingData"),
        )
        return Emulated(name, {"Arn": alarm.alarm_arn}, lambda: backend.delete_alarms([name]))


@model("AWS::Lambda::Url")
class FunctionUrl:
    """The function's URL configuration (moto does not serve the URL itself)."""

    @staticmethod
    def create(name, props, account, region):
        from moto.awslambda.models import lambda_backends

        backend = lambda_backends[account][region]
        target = props["TargetFunctionArn"]
        config = backend.create_function_url_config(target, {k: v for k, v in props.items() if k != "TargetFunctionArn"}).to_dict()

        def delete():
            try:
                backend.delete_function_url_config(target)
            except Exception:  # the function went first: its URL went with it
                pass

        return Emulated(config["FunctionArn"], {"FunctionUrl": config["FunctionUrl"], "FunctionArn": config["FunctionArn"]}, delete)


def mend_cloudformation():
    """Where moto's CloudFormation answers the CDK CLI otherwise than AWS's does."""
    from moto.cloudformation.exceptions import CloudFormationError
    from moto.cloudformation.models import CloudFormationBackend, Stack

    def find(backend, change_set_name):
        return change_set_name in backend.change_sets or any(cs.change_set_name == change_set_name for cs in backend.change_sets.values())

    # Before each deploy to a stack that exists, the CLI deletes its previous change set "if it exists", then waits
    # until describing it answers ChangeSetNotFound. AWS deletes a change set that does not exist without an
    # error; moto fails with a 500, and describes a missing change set as a missing stack.
    delete_change_set = CloudFormationBackend.delete_change_set

    def delete_change_set_if_any(self, change_set_name):
        if find(self, change_set_name):
            delete_change_set(self, change_set_name)

    CloudFormationBackend.delete_change_set = delete_change_set_if_any

    class ChangeSetNotFound(CloudFormationError):
        # The shape's name: moto answers with the error code and status AWS's model gives it.
        code = "ChangeSetNotFoundException"

    describe_change_set = CloudFormationBackend.describe_change_set

    def describe_change_set_or_not_found(self, change_set_name):
        if not find(self, change_set_name):
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        return describe_change_set(self, change_set_name)

    CloudFormationBackend.describe_change_set = describe_change_set_or_not_found

    # A change set for an update keeps a parameter's previous value as it was given (for the CDK's BootstrapVersion,
    # the SSM parameter's name), as AWS does; moto keeps the value that name resolved to, and then fails looking up
    # an SSM parameter named after that value.
    def given_parameters(stack):
        declared = stack.template_dict.get("Parameters", {})
        return {name: stack.resource_map.input_parameters.get(name, p.get("Default")) for name, p in declared.items()}

    Stack.stack_parameters = property(given_parameters)

    # A stack made by a change set has its outputs once the change set ran (moto computes them when the empty
    # stack is made, and never again, so `cdk deploy --outputs-file` writes {}).
    execute_change_set = CloudFormationBackend.execute_change_set

    def execute_change_set_and_outputs(self, change_set_name, stack_name=None):
        execute_change_set(self, change_set_name, stack_name)
        for stack in self.stacks.values():
            if stack.stack_id == stack_name or stack.name == stack_name or any(
                cs.stack_id == stack.stack_id and (cs.change_set_id == change_set_name or cs.change_set_name == change_set_name)
                for cs in self.change_sets.values()
            ):
                stack._parse_template()
                stack.output_map = stack._create_output_map()

    CloudFormationBackend.execute_change_set = execute_change_set_and_outputs


def unsupported(template_file):
    """The template's types moto's own CloudFormation skips, each with the warning moto gives as it skips it."""
    from moto.cloudformation.parsing import parse_resource

    with open(template_file) as f:
        types = sorted({r["Type"] for r in json.load(f)["Resources"].values()})
    for t in types:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            # moto looks the type up before it reads anything else of the resource.
            if parse_resource({"Type": t}, None) is None:
                print(f"{t}\t{said[0].message if said else ''}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--unsupported"]:
        unsupported(sys.argv[2])
        sys.exit(0)
    register_models()
    mend_cloudformation()
    from moto.server import main

    main(sys.argv[1:])
